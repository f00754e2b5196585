//! The PromQL path against a real Prometheus (Debian's `prometheus`) that scrapes the
//! simulator's exporters: what Gantry shows through Prometheus equals the simulator's truth.

use std::time::Duration;

use server::telemetry::promql::PromQl;
use server::telemetry::scrape::{Client, ScrapeConfig};

use crate::support::{self, get};

fn prometheus() -> Option<&'static str> {
    let bin = "/usr/bin/prometheus";
    support::installed(
        std::path::Path::new(bin),
        "Debian's prometheus",
        "apt-get install prometheus",
    )
    .then_some(bin)
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

/// Prometheus's configuration: scrape every simulated node's three exporters on Gantry,
/// labelled as a real site would be (instance = node:port).
fn prometheus_yml(gantry: std::net::SocketAddr, nodes: u32) -> String {
    scrape_yml(gantry, nodes, "1s", "900ms")
}

/// The same, scraping every `interval` (VictoriaMetrics reads Prometheus's format).
pub(crate) fn scrape_yml(
    gantry: std::net::SocketAddr,
    nodes: u32,
    interval: &str,
    timeout: &str,
) -> String {
    // The simulator's names: three digits, four from 1,000 nodes.
    let width = if nodes >= 1000 { 4 } else { 3 };
    let targets: Vec<String> = (1..=nodes).map(|n| format!("\"gpu{n:0width$}\"")).collect();
    let job = |name: &str, port: u16| {
        format!(
            "  - job_name: {name}\n    static_configs:\n      - targets: [{t}]\n    relabel_configs:\n\
             \x20     - source_labels: [__address__]\n        target_label: __metrics_path__\n        replacement: /sim/exporter/{name}/${{1}}/metrics\n\
             \x20     - source_labels: [__address__]\n        target_label: instance\n        replacement: ${{1}}:{port}\n\
             \x20     - target_label: __address__\n        replacement: {gantry}\n",
            t = targets.join(", ")
        )
    };
    format!(
        "global:\n  scrape_interval: {interval}\n  scrape_timeout: {timeout}\nscrape_configs:\n{}{}{}",
        job("dcgm", 9400),
        job("ipmi", 9290),
        job("node", 9100)
    )
}

/// Debian's Prometheus with `dir/prometheus.yml`, its data under `dir`, on `port`; killed
/// when dropped.
fn start_prometheus(bin: &str, dir: &std::path::Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start prometheus")
}

#[tokio::test]
async fn the_overview_reads_through_a_real_prometheus() {
    let Some(bin) = prometheus() else { return };
    let prom_port = free_port();
    let prom_url = format!("http://127.0.0.1:{prom_port}");
    // A frozen simulation: readings stay the same, so Prometheus's samples must equal them.
    let mut cfg = support::test_config(support::sqlite_url(), 64, 1e-6, 500);
    cfg.telemetry = server::config::TelemetryKind::PromQl;
    cfg.promql_url = Some(prom_url.clone());
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;

    let dir = std::env::temp_dir().join(format!("gantry-prom-{}-{prom_port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("prometheus.yml"), prometheus_yml(r.addr, 64)).expect("config");
    let mut child = start_prometheus(bin, &dir, prom_port);

    let prom = PromQl::new(
        Client::new(
            ScrapeConfig::default(),
            server::tls::client_config(None).expect("tls"),
        ),
        &prom_url,
    );
    // Every answering node scraped: 63 nodes x 8 GPUs (gpu061 is down and does not answer).
    let mut seen = 0;
    for _ in 0..150 {
        seen = match prom
            .query(
                "count(DCGM_FI_DEV_POWER_USAGE) + count(ipmi_dcmi_power_consumption_watts)",
                None,
            )
            .await
        {
            Ok(s) => s
                .first()
                .and_then(|s| s.points.last())
                .map(|p| p.1 as i64)
                .unwrap_or(0),
            Err(_) => 0,
        };
        if seen == 63 * 8 + 63 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        seen,
        63 * 8 + 63,
        "Prometheus did not scrape every exporter in 30 s"
    );
    let complete_at = server::clock::wall_now_ms();

    // The overview, computed from PromQL answers, equals the truth at its tick.
    let mut matched = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Some(tick) = r.live.current() else {
            continue;
        };
        let Some(truth) = r.live.truth(Some(tick.overview.seq)) else {
            continue;
        };
        let ov = &tick.overview;
        if ov.summary.power_watts == truth.power_watts
            && ov.summary.gpus_throttling == truth.gpus_throttling
            && ov
                .racks
                .iter()
                .zip(&truth.racks)
                .all(|(a, b)| a.power_watts == Some(b.power_watts))
        {
            matched = true;
            break;
        }
    }
    assert!(
        matched,
        "the overview read through Prometheus never equalled the truth"
    );
    // NVSwitches through the store too: every answering node's four, as the simulator's
    // exporters print them (placed by their `Hostname` label), at a round where the store
    // had every node fresh (a scrape Prometheus timed out leaves a node out for a moment).
    let frame = r.live.sim_frame().expect("frame");
    let mut compared = None;
    for _ in 0..40 {
        let latest = r.live.latest().expect("latest");
        let read = latest.readings();
        let complete = read.nodes.iter().all(|n| {
            n.switches.len() == 4 || n.name == "gpu061" // the down node answers nothing
        });
        if complete {
            let mut n = 0;
            for x in &frame.readings.nodes {
                let node = &x.name;
                let read = read.node(node).expect("node");
                assert_eq!(read.switches, x.switches, "{node}");
                n += usize::from(read.switches.len() == 4);
            }
            compared = Some(n);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        compared,
        Some(63),
        "never a round with every node's switches"
    );
    // InfiniBand traffic through the store: node_exporter's counters as a rate, summed per
    // leaf switch. Only the store knows them here (nothing is scraped directly).
    let leaves = support::leaf_ib_traffic(&r, 40, Duration::from_millis(250)).await;
    assert_eq!(leaves.len(), 8, "{leaves:?}");
    assert!(
        leaves
            .iter()
            .all(|(_, ib)| ib.is_some_and(|b| b.is_finite() && b >= 0.0)),
        "every leaf's IB traffic read through Prometheus: {leaves:?}"
    );
    let targets = get(r.addr, "/api/targets").await.json();
    assert_eq!(
        targets["targets"].as_array().map(Vec::len),
        Some(0),
        "nothing scraped directly"
    );

    // History through query_range: gpu001's GPU 0 power since the data was complete is the
    // frame's, at every step.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let frame = r.live.sim_frame().expect("frame");
    let want = frame
        .readings
        .gpus
        .iter()
        .find(|g| g.node == "gpu001" && g.index == 0)
        .and_then(|g| g.power_watts);
    let now = server::clock::wall_now_ms();
    let series = prom
        .query_range(
            "DCGM_FI_DEV_POWER_USAGE{Hostname=\"gpu001\",gpu=\"0\"}",
            complete_at,
            now,
            500,
        )
        .await
        .expect("range");
    assert_eq!(series.len(), 1);
    assert!(series[0].points.len() >= 3, "{:?}", series[0].points);
    for (_, v) in &series[0].points {
        assert!(
            (Some(*v) == want.map(|w| (w * 1e6).round() / 1e6)),
            "{v} vs {want:?}"
        );
    }
    // A query the store refuses comes back with the store's reason, not a bare status.
    match prom.query("sum(", None).await {
        Err(server::telemetry::promql::PromError::Query { kind, message }) => {
            assert_eq!(kind, "bad_data");
            assert!(message.contains("parse error"), "{message}");
        }
        other => panic!("expected the store's refusal, got {other:?}"),
    }
    let _ = child.kill().await;
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}

/// The racks' power shelves and NVLink switch trays through a real Prometheus scraping
/// the simulator's redfish_exporter and NMX-T text per rack, labelled as a site would
/// (instance = the power controller or the NMX-T switch tray, a `rack` label added by
/// relabelling): the live shelves and limits, and the links down and compute trays cut,
/// equal the truth's.
#[tokio::test]
async fn power_shelves_read_through_a_real_prometheus() {
    let Some(bin) = prometheus() else { return };
    let prom_port = free_port();
    let prom_url = format!("http://127.0.0.1:{prom_port}");
    // A frozen NVL72 simulation: rack A02's degraded shelf is there from the start.
    let mut cfg = support::test_config(support::sqlite_url(), 144, 1e-6, 500);
    cfg.sim.profile = server::sim::Profile::Nvl72;
    cfg.telemetry = server::config::TelemetryKind::PromQl;
    cfg.promql_url = Some(prom_url.clone());
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;
    let racks: Vec<String> = r
        .live
        .inventory()
        .expect("inventory")
        .racks
        .iter()
        .map(|k| format!("\"{}\"", k.name))
        .collect();
    assert_eq!(racks.len(), 8);
    let yml = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n\
         \x20 - job_name: redfish\n    static_configs:\n      - targets: [{t}]\n    relabel_configs:\n\
         \x20     - source_labels: [__address__]\n        target_label: __metrics_path__\n        replacement: /sim/exporter/redfish/${{1}}/metrics\n\
         \x20     - source_labels: [__address__]\n        target_label: rack\n\
         \x20     - source_labels: [__address__]\n        target_label: instance\n        replacement: ${{1}}-pmc:9610\n\
         \x20     - target_label: __address__\n        replacement: {gantry}\n\
         \x20 - job_name: nmxt\n    scrape_interval: 2s\n    scrape_timeout: 1900ms\n    static_configs:\n      - targets: [{t}]\n    relabel_configs:\n\
         \x20     - source_labels: [__address__]\n        target_label: __metrics_path__\n        replacement: /sim/exporter/nmxt/${{1}}/xcset/nvlink_domain_telemetry\n\
         \x20     - source_labels: [__address__]\n        target_label: rack\n\
         \x20     - source_labels: [__address__]\n        target_label: instance\n        replacement: ${{1}}-nmx:9352\n\
         \x20     - target_label: __address__\n        replacement: {gantry}\n",
        t = racks.join(", "),
        gantry = r.addr
    );
    let dir = std::env::temp_dir().join(format!(
        "gantry-prom-shelf-{}-{prom_port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("prometheus.yml"), yml).expect("config");
    let mut child = start_prometheus(bin, &dir, prom_port);

    let mut matched = None;
    for _ in 0..150 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(tick) = r.live.current() else {
            continue;
        };
        let Some(truth) = r.live.truth(Some(tick.overview.seq)) else {
            continue;
        };
        let ov = &tick.overview;
        let all_reporting = ov.racks.iter().all(|k| {
            k.shelves.as_ref().is_some_and(|s| s.reporting == 8)
                && k.fabric.as_ref().is_some_and(|f| f.reporting == 9)
        });
        if all_reporting {
            matched = Some((ov.clone(), truth));
            break;
        }
    }
    let (ov, truth) =
        matched.expect("every rack's shelves and switch trays read through Prometheus in 30 s");
    for (tile, t) in ov.racks.iter().zip(&truth.racks) {
        let sh = tile.shelves.as_ref().expect("shelves");
        assert_eq!(tile.power_limit_watts, t.power_limit_watts, "{}", tile.name);
        assert_eq!(sh.limit_watts, t.shelf_limit_watts, "{}", tile.name);
        assert_eq!(sh.down, t.shelves_down, "{}", tile.name);
        assert_eq!(sh.degraded, t.shelves_degraded, "{}", tile.name);
        let f = tile.fabric.as_ref().expect("fabric");
        assert_eq!(f.down, t.nvlink_down, "{}", tile.name);
        if tile.name != "A07" {
            assert_eq!(f.cut, t.nvlink_cut, "{}", tile.name);
        }
        assert_eq!(f.links - f.active, t.nvlink_links_down, "{}", tile.name);
        assert_eq!(f.links, 1296, "{}", tile.name);
    }
    // The link down from the start is on the tray the layout misplaces (the truth's
    // gb0127). This store holds no DCGM series, so nothing places the tray but the
    // layout's order, which names the layout's tray 0 of A07.
    assert_eq!(truth.racks[6].nvlink_cut, ["gb0127"]);
    assert_eq!(
        ov.racks[6].fabric.as_ref().map(|f| f.cut.clone()),
        Some(vec!["gb0109".to_string()])
    );
    assert_eq!(
        ov.racks[1].shelves.as_ref().map(|s| s.degraded.clone()),
        Some(vec!["PowerShelf_5".to_string()])
    );
    assert_eq!(ov.racks[1].power_limit_watts, 126_500.0);
    let _ = child.kill().await;
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}

/// Gantry's derived figures (`/metrics/cluster`) scraped by a real Prometheus and read
/// back with PromQL: equal to the overview the pages show (a frozen simulation, so every
/// scrape sees the same tick's numbers).
#[tokio::test]
async fn derived_figures_read_back_through_a_real_prometheus() {
    let Some(bin) = prometheus() else { return };
    let prom_port = free_port();
    let prom_url = format!("http://127.0.0.1:{prom_port}");
    let cfg = support::test_config(support::sqlite_url(), 64, 1e-6, 500);
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;
    // Readings in: the scrape path has read the simulator's exporters.
    for _ in 0..100 {
        if r.live
            .current()
            .is_some_and(|t| t.overview.racks.iter().all(|k| k.power_watts.is_some()))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir =
        std::env::temp_dir().join(format!("gantry-figures-{}-{prom_port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n\
             \x20 - job_name: gantry\n    metrics_path: /metrics/cluster\n    static_configs:\n      - targets: [\"{}\"]\n",
            r.addr
        ),
    )
    .expect("config");
    let _child = start_prometheus(bin, &dir, prom_port);
    let prom = PromQl::new(
        Client::new(
            ScrapeConfig::default(),
            server::tls::client_config(None).expect("tls"),
        ),
        &prom_url,
    );
    let one = |expr: String| {
        let prom = &prom;
        async move {
            prom.query(&expr, None)
                .await
                .ok()
                .and_then(|s| s.first().and_then(|s| s.points.last()).map(|p| p.1))
        }
    };
    let ov = r.live.current().expect("a tick").overview.clone();
    let racks = ov.racks.len() as f64;
    let mut scraped = None;
    for _ in 0..150 {
        scraped = one("count(gantry_rack_power_limit_watts)".into()).await;
        if scraped == Some(racks) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        scraped,
        Some(racks),
        "Prometheus did not scrape the figures in 30 s"
    );
    // Prometheus's `up` says the text parsed.
    assert_eq!(one("up{job=\"gantry\"}".into()).await, Some(1.0));

    // The frozen simulation's tick is the one every scrape saw.
    let now = r.live.current().expect("a tick").overview.clone();
    // (The alert task marks racks with their incidents once it has evaluated: a mark, not
    // a move of the simulation.)
    let unmarked = |v: &[app::live::RackTile]| {
        v.iter()
            .cloned()
            .map(|mut t| {
                t.incident = None;
                t
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        unmarked(&now.racks),
        unmarked(&ov.racks),
        "the simulation moved"
    );
    for k in &now.racks {
        assert_eq!(
            one(format!("gantry_rack_power_watts{{rack=\"{}\"}}", k.name)).await,
            k.power_watts,
            "rack {} power",
            k.name
        );
        assert_eq!(
            one(format!(
                "gantry_rack_power_limit_watts{{rack=\"{}\"}}",
                k.name
            ))
            .await,
            Some(k.power_limit_watts)
        );
        assert_eq!(
            one(format!("gantry_rack_inlet_celsius{{rack=\"{}\"}}", k.name)).await,
            k.inlet_celsius
        );
    }
    for d in &now.domains {
        assert_eq!(
            one(format!(
                "gantry_domain_gpus_allocated{{domain=\"{}\"}}",
                d.name
            ))
            .await,
            Some(f64::from(d.gpus.allocated)),
            "domain {}",
            d.name
        );
        assert_eq!(
            one(format!("gantry_domain_gpus{{domain=\"{}\"}}", d.name)).await,
            Some(f64::from(d.gpus.total))
        );
    }
    let g = &now.summary.gpus;
    for (state, n) in [
        ("allocated", g.allocated),
        ("idle", g.idle),
        ("drained", g.drained),
        ("down", g.down),
    ] {
        assert_eq!(
            one(format!("gantry_cluster_gpus{{state=\"{state}\"}}")).await,
            Some(f64::from(n)),
            "{state}"
        );
    }
    // Throttling per reason, for the cluster, as /thermal counts it; and the racks' add up
    // to the cluster's.
    for rc in &now.thermal.by_reason {
        let want = Some(f64::from(rc.gpus));
        assert_eq!(
            one(format!(
                "gantry_gpus_throttling{{rack=\"\",reason=\"{}\"}}",
                rc.reason
            ))
            .await,
            want,
            "{}",
            rc.reason
        );
        assert_eq!(
            one(format!(
                "sum(gantry_gpus_throttling{{rack!=\"\",reason=\"{}\"}})",
                rc.reason
            ))
            .await,
            want
        );
    }
    assert_eq!(
        one("gantry_cluster_power_watts".into()).await,
        Some(now.summary.power_watts)
    );
    // The floor's marks and the free segments, as the tick has them.
    for sf in &now.segments {
        for (size, n, _) in &sf.sizes {
            assert_eq!(
                one(format!(
                    "gantry_free_segments{{base=\"{}\",size=\"{size}\"}}",
                    sf.base
                ))
                .await,
                Some(f64::from(*n)),
                "--segment={size}"
            );
        }
    }
    assert!(!now.segments.is_empty(), "the simulator has block segments");
    let lemons = now
        .nodes
        .iter()
        .filter(|t| t.marks & app::live::marks::LEMON != 0)
        .count();
    assert_eq!(
        one("gantry_nodes_marked{mark=\"lemon\"}".into()).await,
        Some(lemons as f64)
    );

    // The Grafana dashboard Gantry ships: every query of every panel answers from this
    // real Prometheus, so no panel names a series Gantry does not write.
    let dash: serde_json::Value =
        serde_json::from_str(include_str!("../../dist/grafana-dashboard.json")).expect("JSON");
    let panels = dash["panels"].as_array().expect("panels");
    let mut ids = std::collections::HashSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(ids.insert(p["id"].as_u64()), "{title}: a panel id twice");
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            // A rate needs two scrapes in its window: up to 10 s (one a second).
            let mut answered = false;
            for _ in 0..50 {
                let series = prom.query(expr, None).await.expect(expr);
                answered = series.iter().any(|s| !s.points.is_empty());
                if answered {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            assert!(answered, "{title}: {expr} gives nothing");
        }
    }
    assert_eq!(
        dash["templating"]["list"][0]["type"], "datasource",
        "the Prometheus to read from is chosen on import"
    );
    r.stop().await.expect("stop");
}
