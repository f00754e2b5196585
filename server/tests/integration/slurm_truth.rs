//! The truth test on the real source: Gantry on the real Slurm, its exporters served with
//! known readings, shows what they imply on every page and in its figures.

use std::time::Duration;

use crate::exporters::{
    known_readings, scrape_from, serve_exporters, text_after, write_two_racks, THROTTLED,
};
use crate::slurm::{cluster, sbatch};

/// The truth test on the real source: Gantry with `source = "slurm"` on the real cluster,
/// scraping exporters that this test serves with known readings, shows what those readings
/// imply on /thermal, /racks and /topology: GPU-hours lost to throttling (counted as time
/// passes), each rack's power, GPUs throttling per rack, SM activity per leaf switch.
#[tokio::test]
async fn a_real_slurm_with_exporters_shows_what_they_read() {
    use crate::support;
    let Some(cli) = cluster() else {
        return;
    };
    let conf_path = std::env::var("GANTRY_TEST_SLURM_CONF").unwrap_or_default();
    let nodes = cli.nodes().await.expect("nodes");
    // The exporters' own picture of the cluster: eight nodes to a rack in name order, as the
    // layout below places them.
    let inv = server::sources::slurm::inventory_from_nodes("truth", &nodes);
    let readings = known_readings(&inv);
    let exporters = serve_exporters(inv.clone(), readings.clone()).await;

    let dir = std::env::temp_dir().join(format!("gantry-truth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (layout, topology) = (dir.join("layout.toml"), dir.join("topology.conf"));
    write_two_racks(&layout, true);
    std::fs::write(
        &topology,
        "SwitchName=leaf1 Nodes=gpu[001-008]\nSwitchName=leaf2 Nodes=gpu[009-016]\n\
         SwitchName=spine Switches=leaf[1-2]\n",
    )
    .expect("topology");
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.conf = Some(conf_path.clone().into());
    cfg.slurm.poll_interval_ms = 500;
    cfg.slurm.layout = Some(layout);
    cfg.slurm.topology = Some(topology);
    scrape_from(&mut cfg, exporters);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;

    // What the readings imply.
    let gpus_of = |names: &[&str]| -> u32 {
        nodes
            .iter()
            .filter(|n| names.contains(&n.name.as_str()))
            .map(|n| n.gpus_total.unwrap_or(0))
            .sum()
    };
    let throttled = gpus_of(&THROTTLED);
    assert!(throttled > 0, "the throttled nodes have GPUs");
    let node_watts = |name: &str| -> f64 {
        readings
            .node(name)
            .expect("node")
            .power_watts
            .unwrap_or(0.0)
    };
    // The exporters' rack01 is the layout's R1 (gpu001-gpu008), rack02 its R2.
    let in_rack = |rack: &str| -> Vec<&str> {
        inv.nodes
            .iter()
            .filter(|n| n.rack == rack)
            .map(|n| n.name.as_str())
            .collect()
    };
    let r1_watts: f64 = in_rack("rack01").into_iter().map(node_watts).sum();
    let r2_watts: f64 = in_rack("rack02").into_iter().map(node_watts).sum();

    // Every node reporting: all GPUs of the cluster present with values.
    let mut first = None;
    for _ in 0..100 {
        if let Some(t) = r.live.current() {
            let ov = &t.overview;
            if ov.summary.gpus_throttling == throttled
                && ov.racks.iter().all(|k| k.power_watts.is_some())
                && ov
                    .racks
                    .iter()
                    .find(|k| k.name == "R1")
                    .and_then(|k| k.power_watts)
                    == Some(r1_watts)
            {
                first = Some(std::sync::Arc::clone(&t.overview));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = first.expect("every node's exporters read");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let last = std::sync::Arc::clone(&r.live.current().expect("tick").overview);

    // GPU-hours lost: each throttled GPU's deficit (0.9) over the time between the ticks.
    let hours = (last.at_ms - first.at_ms) as f64 / 3_600_000.0;
    let want = f64::from(throttled) * 0.9 * hours;
    let got = last.thermal.lost_gpu_hours - first.thermal.lost_gpu_hours;
    assert!(
        want > 0.05 && (got - want).abs() <= 0.011,
        "GPU-hours lost to throttling over {hours} h: {got}, the readings imply {want}"
    );
    let by_rack: std::collections::HashMap<&str, f64> = last
        .thermal
        .lost_by_rack
        .iter()
        .map(|(k, h)| (k.as_str(), *h))
        .collect();
    assert!(
        by_rack.get("R1").copied().unwrap_or(0.0) >= got - 0.011,
        "{by_rack:?}"
    );
    assert_eq!(
        by_rack.get("R2").copied().unwrap_or(0.0),
        0.0,
        "{by_rack:?}"
    );

    // /thermal: throttling now, per rack, and the GPU-hours lost.
    let html = support::get(r.addr, "/thermal").await.text();
    assert_eq!(
        text_after(&html, r#"data-test="thermal-throttling""#),
        Some(throttled.to_string().as_str())
    );
    let r1 = &html[html.find(r#"data-rack="R1""#).expect("R1 row")..];
    assert_eq!(
        text_after(r1, r#"data-test="rack-throttling""#),
        Some(throttled.to_string().as_str())
    );
    let r2 = &html[html.find(r#"data-rack="R2""#).expect("R2 row")..];
    assert_eq!(text_after(r2, r#"data-test="rack-throttling""#), Some("0"));
    let lost: f64 = text_after(&html, r#"data-test="thermal-lost""#)
        .and_then(|t| t.trim_end_matches(" GPU-h").parse().ok())
        .expect("GPU-hours lost on /thermal");
    assert!(
        lost >= last.thermal.lost_gpu_hours && lost > 0.0,
        "/thermal shows {lost} GPU-h lost, the newest tick before it {}",
        last.thermal.lost_gpu_hours
    );

    // /racks: each rack's power is the sum of its nodes' BMC readings.
    let html = support::get(r.addr, "/racks").await.text();
    for (rack, watts) in [("R1", r1_watts), ("R2", r2_watts)] {
        let head = &html[html
            .find(&format!(r#"data-rack="{rack}""#))
            .unwrap_or_else(|| panic!("{rack} on the floor"))..];
        assert!(
            head.contains(&format!(r#"data-power-watts="{watts:.1}""#)),
            "{rack} should draw {watts} W"
        );
    }

    // Halls (the layout puts R1 in H1 with a 50 kW feed, R2 in H2): each the sum of its
    // racks, on the overview, in the figures and as the level of /racks.
    let h1 = last.halls.iter().find(|h| h.name == "H1").expect("hall H1");
    let h2 = last.halls.iter().find(|h| h.name == "H2").expect("hall H2");
    assert_eq!(h1.power_watts, r1_watts);
    assert_eq!(h2.power_watts, r2_watts);
    assert_eq!(
        (h1.power_feed_watts, h2.power_feed_watts),
        (Some(50_000.0), None)
    );
    assert_eq!(h1.gpus.total, gpus_of(&in_rack("rack01")));
    assert_eq!(h2.gpus.total, gpus_of(&in_rack("rack02")));
    assert_eq!((h1.gpus_throttling, h2.gpus_throttling), (throttled, 0));
    let html = support::get(r.addr, "/").await.text();
    let row = &html[html.find(r#"data-hall="H1""#).expect("H1 on the overview")..];
    assert_eq!(
        text_after(row, r#"data-test="hall-power""#),
        Some(app::units::power(Some(r1_watts)).as_str())
    );
    let figures = support::get(r.addr, "/metrics/cluster").await.text();
    assert!(
        figures.contains(&format!(
            "gantry_hall_power_watts{{hall=\"H1\"}} {r1_watts}"
        )),
        "{figures}"
    );
    assert!(figures.contains("gantry_hall_power_feed_watts{hall=\"H1\"} 50000"));
    let h2_floor = support::get(r.addr, "/racks?hall=H2").await.text();
    assert!(h2_floor.contains(r#"data-rack="R2""#) && !h2_floor.contains(r#"data-rack="R1""#));

    // /topology: per leaf switch, GPUs allocated as Slurm says and SM activity as the
    // allocated nodes' exporters say (the mean over nodes of their GPUs' mean). A job of
    // this test's own runs on gpu006 (leaf1); other tests' jobs may run alongside, so the
    // expectation is taken from the allocation of the tick the page shows.
    let job = sbatch(
        &conf_path,
        &[
            "-N1",
            "-w",
            "gpu006",
            "--exclusive",
            "-p",
            "gpu",
            "--output=/dev/null",
            "-J",
            "gantry-truth",
            "--wrap",
            "sleep 120",
        ],
    );
    let sm_of = |node: &str| if THROTTLED.contains(&node) { 0.45 } else { 0.9 };
    let leaf_of = |node: &str| if node <= "gpu008" { "leaf1" } else { "leaf2" };
    let mut checked = false;
    for _ in 0..100 {
        let before = r.live.current().expect("tick");
        let html = support::get(r.addr, "/topology").await.text();
        let after = r.live.current().expect("tick");
        let ov = &before.overview;
        let ours = ov
            .nodes
            .iter()
            .any(|n| n.name == "gpu006" && n.jobs.contains(&job));
        if before.overview.seq != after.overview.seq || !ours {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        for leaf in ["leaf1", "leaf2"] {
            let allocated: Vec<&app::live::NodeTile> = ov
                .nodes
                .iter()
                .filter(|n| leaf_of(&n.name) == leaf && !n.jobs.is_empty())
                .collect();
            let gpus: u32 = allocated.iter().map(|n| n.gpus).sum();
            let sm = (!allocated.is_empty()).then(|| {
                let mean =
                    allocated.iter().map(|n| sm_of(&n.name)).sum::<f64>() / allocated.len() as f64;
                (mean * 100.0).round() / 100.0
            });
            let row = &html[html
                .find(&format!(r#"data-domain="{leaf}""#))
                .unwrap_or_else(|| panic!("{leaf} on /topology"))..];
            let row = &row[..row.find("</tr>").unwrap_or(row.len())];
            assert!(
                row.contains(&format!(r#"data-allocated="{gpus}""#)),
                "{leaf}: {gpus} GPUs allocated: {row}"
            );
            assert!(
                row.contains(&format!(">{}<", app::units::percent(sm))),
                "{leaf}: SM activity {sm:?}: {row}"
            );
        }
        checked = true;
        break;
    }
    let _ = std::process::Command::new("scancel")
        .arg(job.to_string())
        .env("SLURM_CONF", &conf_path)
        .status();
    assert!(checked, "the job on gpu006 shows on /topology");
    r.stop().await.expect("stop");
}
