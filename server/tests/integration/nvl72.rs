//! The NVL72 profile's truth tests, on the running server: the coolant leak alert fires
//! within two live intervals of the tick whose truth first has it, naming the rack, the
//! trays and the jobs the truth has there and what taking the rack out costs in free
//! segments; the live free segments per size and the largest free segment equal the
//! truth's at the same tick; a rack's drain preview says what the truth's idle nodes say;
//! DCGM's platform identity fields, scraped, map every rack and name exactly the trays the
//! layout misplaces.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use server::sim::{SimTruth, TruthSegments};

use crate::support::{self, add_users, login, post_json};

async fn start(speed: f64, interval_ms: u64) -> server::serve::Running {
    start_on(support::sqlite_url(), speed, interval_ms).await
}

async fn start_on(url: String, speed: f64, interval_ms: u64) -> server::serve::Running {
    let mut cfg = support::test_config(url, 144, speed, interval_ms);
    cfg.sim.profile = server::sim::Profile::Nvl72;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    r
}

/// What draining every node of `rack` costs, in the words of the preview and the leak
/// alert, from the truth's idle nodes per block (the NVL72 profile: one block per rack).
fn expected_drain_words(t: &TruthSegments, block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let idle = t.blocks.iter().find(|b| b.0 == block).map_or(0, |b| b.1);
    if idle > 0 {
        out.push(format!("block {block} goes from {idle} to 0 free nodes"));
    }
    let after = t
        .blocks
        .iter()
        .filter(|b| b.0 != block)
        .map(|b| b.1.min(t.base))
        .max()
        .unwrap_or(0);
    if after < t.largest_free_segment {
        out.push(format!(
            "the largest free segment goes from {} to {after} nodes",
            t.largest_free_segment
        ));
    }
    out
}

#[tokio::test]
async fn a_coolant_leak_fires_within_two_intervals_naming_rack_trays_jobs_and_segments_on_both_databases(
) {
    leak_fires(support::sqlite_url()).await;
    if let Some(pg) = support::postgres_url().await {
        leak_fires(pg).await;
    }
}

async fn leak_fires(url: String) {
    // 60x: the scenario's leak warns 10 simulated minutes in (10 s), critical at 12.
    let interval_ms = 1_000;
    let r = start_on(url, 60.0, interval_ms).await;
    let inv = r.live.inventory().expect("inventory");
    let mut truths: BTreeMap<u64, (i64, Arc<SimTruth>)> = BTreeMap::new();
    let mut first_critical: Option<(u64, i64, usize)> = None;
    let deadline = Instant::now() + Duration::from_secs(90);
    let alert = loop {
        assert!(
            Instant::now() < deadline,
            "no leak alert in 90 s: {first_critical:?}"
        );
        if let Some(tick) = r.live.current() {
            let seq = tick.overview.seq;
            if let (false, Some(t)) = (truths.contains_key(&seq), r.live.truth(Some(seq))) {
                if first_critical.is_none() {
                    if let Some(i) = t.racks.iter().position(|x| {
                        x.leaking
                            .iter()
                            .any(|(_, s)| *s == app::model::LeakState::Critical)
                    }) {
                        first_critical = Some((seq, tick.overview.published_ms, i));
                    }
                }
                truths.insert(seq, (tick.overview.published_ms, t));
            }
        }
        if let Some((_, _, i)) = first_critical {
            let subject = format!("rack:{}", inv.racks[i].name);
            let open = r.store.open_alerts().await.expect("alerts");
            if let Some(a) = open
                .into_iter()
                .find(|a| a.rule == "coolant_leak" && a.subject == subject)
            {
                break a;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (seq0, published0, rack_i) = first_critical.expect("critical");
    let rack = &inv.racks[rack_i].name;
    assert_eq!(alert.severity, "critical");
    assert!(
        alert.started_ms - published0 <= 2 * interval_ms as i64,
        "fired {} ms after the tick that first had the leak (seq {seq0})",
        alert.started_ms - published0
    );
    // The tick the alert was fired on: the newest published no later than its firing.
    let (_, fired_truth) = truths
        .values()
        .rfind(|(p, _)| *p <= alert.started_ms)
        .expect("a tick before the alert");
    let tr = &fired_truth.racks[rack_i];
    let trays: Vec<&str> = tr.leaking.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!trays.is_empty());
    assert!(
        alert
            .summary
            .contains(&format!("at tray {};", trays.join(", "))),
        "{}",
        alert.summary
    );
    let named = support::jobs_named(&alert.summary);
    let truth_jobs: BTreeSet<u64> = tr.jobs.iter().copied().collect();
    assert_eq!(named, truth_jobs, "{}", alert.summary);
    let block = format!("b{:02}", rack_i + 1);
    for words in expected_drain_words(&fired_truth.segments[0], &block) {
        assert!(
            alert.summary.contains(&words),
            "{words:?} not in {}",
            alert.summary
        );
    }
    // The rack short of flow is a warning of its own, naming its trays.
    let open = r.store.open_alerts().await.expect("alerts");
    assert!(
        open.iter().any(|a| a.rule == "coolant_flow_low"),
        "{:?}",
        open.iter()
            .map(|a| (&a.rule, &a.subject))
            .collect::<Vec<_>>()
    );
    assert!(!open
        .iter()
        .any(|a| a.rule == "coolant_leak" && a.subject != format!("rack:{rack}")));
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn free_segments_and_a_racks_drain_preview_equal_the_truth() {
    // 600x: jobs start and end under the test's eyes.
    let r = start(600.0, 250).await;
    let mut compared = 0;
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while compared < 20 && Instant::now() < deadline {
        let Some(tick) = r.live.current() else {
            continue;
        };
        let ov = &tick.overview;
        if last == Some(ov.seq) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        last = Some(ov.seq);
        let Some(t) = r.live.truth(Some(ov.seq)) else {
            continue;
        };
        let (live, truth) = (&ov.segments[0], &t.segments[0]);
        assert_eq!((live.base, live.blocks), (18, 8));
        assert_eq!(live.idle_nodes, truth.idle_nodes, "seq {}", ov.seq);
        assert_eq!(live.largest_free_segment, truth.largest_free_segment);
        for &(size, segments, _) in &live.sizes {
            let want = truth
                .sizes
                .iter()
                .find(|x| x.0 == size)
                .map(|x| x.1)
                .expect("a size the truth counts");
            assert_eq!(segments, want, "size {size} at seq {}", ov.seq);
        }
        compared += 1;
    }
    assert_eq!(compared, 20, "too few ticks compared");
    r.stop().await.expect("stop");

    // The preview reads the scheduler when asked: at 1x the cluster holds still between
    // the truth and the answer (retried when a job started or ended in between).
    let r = start(1.0, 250).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    let mut checked = false;
    for _ in 0..5 {
        let before = r.live.truth(None).expect("truth");
        let p = post_json(
            r.addr,
            "/api/actions/preview",
            Some(&op),
            &json!({"action": "drain", "rack": "A01"}),
        )
        .await;
        assert_eq!(p.status, 200, "{}", p.text());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = r.live.truth(None).expect("truth");
        if before.segments != after.segments {
            continue;
        }
        let summary = p.json()["summary"].as_str().expect("summary").to_string();
        let words = expected_drain_words(&before.segments[0], "b01");
        for w in &words {
            assert!(summary.contains(w), "{w:?} not in {summary}");
        }
        if words.is_empty() {
            assert!(!summary.contains("Segments:"), "{summary}");
        }
        checked = true;
        break;
    }
    assert!(checked, "the cluster never held still for a preview");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn dcgm_identity_fields_map_the_racks_and_name_the_trays_the_layout_misplaces() {
    // Scraped from the simulator's dcgm-exporter text: the profile plants two trays
    // swapped in rack A04 and a tray swapped between racks A07 and A08.
    let r = start(1.0, 250).await;
    let truth = r.live.truth(None).expect("truth");
    assert_eq!(truth.misplaced.len(), 4, "{:?}", truth.misplaced);
    // Every tray that answers reports once the first scrape round is in (a failed tray's
    // exporter does not answer).
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let p = support::get(r.addr, "/api/placement").await;
        assert_eq!(p.status, 200, "{}", p.text());
        let body = p.json();
        if body["nodes_reporting"].as_u64().is_some_and(|n| n >= 140) {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "too few trays report: {}",
            body["nodes_reporting"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let chassis = body["chassis"].as_array().expect("chassis");
    let reporting: BTreeSet<&str> = chassis
        .iter()
        .flat_map(|c| c["trays"].as_array().into_iter().flatten())
        .map(|t| t["node"].as_str().expect("node"))
        .collect();
    assert_eq!(
        Some(reporting.len() as u64),
        body["nodes_reporting"].as_u64()
    );
    let named: Vec<&str> = body["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|i| i["node"].as_str().expect("node"))
        .collect();
    let want: Vec<&str> = truth
        .misplaced
        .iter()
        .map(String::as_str)
        .filter(|n| reporting.contains(n))
        .collect();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(named, want, "{}", body["issues"]);
    assert_eq!(chassis.len(), 8);
    for (i, c) in chassis.iter().enumerate() {
        assert_eq!(c["rack"], format!("A0{}", i + 1));
        assert!(
            c["trays"].as_array().is_some_and(|t| t.len() >= 16),
            "{}",
            c["rack"]
        );
    }
    // /topology (server-rendered) lists the same disagreements under their racks.
    let page = support::get(r.addr, "/topology").await;
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(
        html.contains("trays in 8 racks report their chassis and tray"),
        "{}",
        html.split("Fragmented jobs")
            .next()
            .unwrap_or("")
            .rsplit("</table>")
            .next()
            .unwrap_or("")
    );
    assert!(html.contains(&format!(
        "The layout file disagrees about {} trays:",
        want.len()
    )));
    for i in body["issues"].as_array().expect("issues") {
        let words = i["words"].as_str().expect("words");
        assert!(
            html.contains(&words.replace('\'', "&#x27;")) || html.contains(words),
            "{words}"
        );
    }
    for rack in ["A01", "A04", "A07", "A08"] {
        let n = body["issues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["rack"] == rack)
            .count();
        assert!(
            html.contains(&format!("data-rack=\"{rack}\" data-issues=\"{n}\"")),
            "{rack}: {n}"
        );
    }
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_power_shelf_down_fires_within_two_intervals_naming_the_shelf_its_lowered_limit_and_the_jobs_drawing_the_rack_on_both_databases(
) {
    shelf_down_fires(support::sqlite_url()).await;
    if let Some(pg) = support::postgres_url().await {
        shelf_down_fires(pg).await;
    }
}

async fn shelf_down_fires(url: String) {
    // 60x: the scenario's shelf goes down 8 simulated minutes in (8 s). Read by scraping
    // the simulator's redfish_exporter text for each rack's power controller.
    let interval_ms = 1_000;
    let r = start_on(url, 60.0, interval_ms).await;
    let inv = r.live.inventory().expect("inventory");
    let mut truths: BTreeMap<u64, (i64, Arc<SimTruth>)> = BTreeMap::new();
    let mut first_down: Option<(u64, i64, usize)> = None;
    let mut compared = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    let alert = loop {
        assert!(
            Instant::now() < deadline,
            "no power_shelf_down alert in 90 s: {first_down:?}"
        );
        if let Some(tick) = r.live.current() {
            let seq = tick.overview.seq;
            if let (false, Some(t)) = (truths.contains_key(&seq), r.live.truth(Some(seq))) {
                // Every rack's limit and shelves, live, equal the truth's at the same tick.
                for (tile, tr) in tick.overview.racks.iter().zip(&t.racks) {
                    let sh = tile.shelves.as_ref().expect("shelves");
                    if sh.reporting() {
                        assert_eq!(
                            tile.power_limit_watts, tr.power_limit_watts,
                            "{} at {seq}",
                            tile.name
                        );
                        assert_eq!(sh.down, tr.shelves_down, "{} at {seq}", tile.name);
                        assert_eq!(sh.degraded, tr.shelves_degraded, "{} at {seq}", tile.name);
                        compared += 1;
                    }
                }
                if first_down.is_none() {
                    if let Some(i) = t.racks.iter().position(|x| !x.shelves_down.is_empty()) {
                        first_down = Some((seq, tick.overview.published_ms, i));
                    }
                }
                truths.insert(seq, (tick.overview.published_ms, t));
            }
        }
        if let Some((_, _, i)) = first_down {
            let subject = format!("rack:{}", inv.racks[i].name);
            let open = r.store.open_alerts().await.expect("alerts");
            if let Some(a) = open
                .into_iter()
                .find(|a| a.rule == "power_shelf_down" && a.subject == subject)
            {
                break a;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(compared >= 8 * 5, "only {compared} rack ticks compared");
    let (seq0, published0, rack_i) = first_down.expect("down");
    assert!(
        alert.started_ms - published0 <= 2 * interval_ms as i64,
        "fired {} ms after the tick that first had the shelf down (seq {seq0})",
        alert.started_ms - published0
    );
    let (_, fired_truth) = truths
        .values()
        .rfind(|(p, _)| *p <= alert.started_ms)
        .expect("a tick before the alert");
    let tr = &fired_truth.racks[rack_i];
    let shelf = tr.shelves_down.join(", ");
    assert_eq!(alert.severity, "warning", "{}", alert.summary);
    assert!(
        alert.summary.starts_with(&format!(
            "rack {}: power shelf down: {shelf} (7 of 8 shelves delivering); its limit is {:.1} kW against the bus bar's 132.0 kW; it draws ",
            tr.name,
            tr.power_limit_watts / 1000.0
        )),
        "{}",
        alert.summary
    );
    let named: BTreeSet<u64> = alert
        .summary
        .split("drawing its power: ")
        .nth(1)
        .unwrap_or("")
        .split("), ")
        .filter_map(|j| j.trim_start_matches("job ").split(' ').next()?.parse().ok())
        .collect();
    let truth_jobs: BTreeSet<u64> = tr.jobs.iter().copied().collect();
    assert_eq!(named, truth_jobs, "{}", alert.summary);
    // The degraded shelf of the profile's second rack is a warning of its own.
    let open = r.store.open_alerts().await.expect("alerts");
    let degraded: Vec<&str> = open
        .iter()
        .filter(|a| a.rule == "power_shelf_degraded")
        .map(|a| a.subject.as_str())
        .collect();
    assert_eq!(degraded, ["rack:A02"]);
    // Every rack's power controller is a scrape target of its own, answering.
    let targets = support::get(r.addr, "/api/targets").await.json();
    let redfish: Vec<&serde_json::Value> = targets["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter(|t| {
            t["url"]
                .as_str()
                .is_some_and(|u| u.contains("/sim/exporter/redfish/"))
        })
        .collect();
    assert_eq!(redfish.len(), inv.racks.len(), "{targets}");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn an_nvlink_switch_tray_down_fires_naming_the_truths_switch_tray_compute_trays_and_jobs_on_both_databases(
) {
    switch_tray_down_fires(support::sqlite_url()).await;
    if let Some(pg) = support::postgres_url().await {
        switch_tray_down_fires(pg).await;
    }
}

async fn switch_tray_down_fires(url: String) {
    // 60x: switch tray sw04 of the fifth rack goes down 6 simulated minutes in (6 s). Read
    // by scraping the simulator's NMX-T text for each rack, at most every 5 s.
    let interval_ms = 1_000;
    let fabric_ms = server::telemetry::ingest::FABRIC_MIN_INTERVAL.as_millis() as i64;
    let r = start_on(url, 60.0, interval_ms).await;
    let inv = r.live.inventory().expect("inventory");
    let mut truths: BTreeMap<u64, (i64, Arc<SimTruth>)> = BTreeMap::new();
    let mut first_down: Option<(u64, i64, usize)> = None;
    let mut compared = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    let alert = loop {
        assert!(
            Instant::now() < deadline,
            "no nvlink_switch_tray_down alert in 90 s: {first_down:?}"
        );
        if let Some(tick) = r.live.current() {
            let seq = tick.overview.seq;
            if let (false, Some(t)) = (truths.contains_key(&seq), r.live.truth(Some(seq))) {
                // The link down from the start: every reporting tick names the truth's
                // compute tray (the one the layout misplaces, placed by DCGM).
                for (tile, tr) in tick.overview.racks.iter().zip(&t.racks) {
                    let f = tile
                        .fabric
                        .as_ref()
                        .expect("every NVL72 rack has switch trays");
                    assert_eq!(f.expected, 9);
                    if f.reporting() && tr.nvlink_down.is_empty() && f.down.is_empty() {
                        assert_eq!(f.cut, tr.nvlink_cut, "{} at {seq}", tile.name);
                        assert_eq!(
                            f.links - f.active,
                            tr.nvlink_links_down,
                            "{} at {seq}",
                            tile.name
                        );
                        compared += 1;
                    }
                }
                if first_down.is_none() {
                    if let Some(i) = t.racks.iter().position(|x| !x.nvlink_down.is_empty()) {
                        first_down = Some((seq, tick.overview.published_ms, i));
                    }
                }
                truths.insert(seq, (tick.overview.published_ms, t));
            }
        }
        if let Some((_, _, i)) = first_down {
            let subject = format!("rack:{}", inv.racks[i].name);
            let open = r.store.open_alerts().await.expect("alerts");
            if let Some(a) = open
                .into_iter()
                .find(|a| a.rule == "nvlink_switch_tray_down" && a.subject == subject)
            {
                break a;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(compared >= 8 * 3, "only {compared} rack ticks compared");
    let (seq0, published0, rack_i) = first_down.expect("down");
    // Within one NMX-T interval and two live intervals of the tick that first had it.
    assert!(
        alert.started_ms - published0 <= fabric_ms + 2 * interval_ms as i64,
        "fired {} ms after the tick that first had the switch tray down (seq {seq0})",
        alert.started_ms - published0
    );
    let (_, fired_truth) = truths
        .values()
        .rfind(|(p, _)| *p <= alert.started_ms)
        .expect("a tick before the alert");
    let tr = &fired_truth.racks[rack_i];
    assert_eq!(tr.nvlink_down, ["sw04"]);
    assert_eq!(tr.nvlink_cut.len(), 18);
    assert_eq!(alert.severity, "critical", "{}", alert.summary);
    assert!(
        alert.summary.starts_with(&format!(
            "rack {}: NVLink switch tray down: sw04 (8 of 9 switch trays up; 1152 of 1296 GPU links active); compute trays cut: {}; ",
            tr.name,
            tr.nvlink_cut.join(", ")
        )),
        "{}",
        alert.summary
    );
    let named = support::jobs_named(&alert.summary);
    let truth_jobs: BTreeSet<u64> = tr.nvlink_jobs.iter().copied().collect();
    assert_eq!(named, truth_jobs, "{}", alert.summary);
    // The link down of the seventh rack is a warning of its own, naming its tray.
    let open = r.store.open_alerts().await.expect("alerts");
    let links = open
        .iter()
        .find(|a| a.rule == "nvlink_links_down")
        .expect("links down");
    let t7 = &fired_truth.racks[6];
    assert_eq!(links.subject, format!("rack:{}", t7.name));
    assert!(
        links
            .summary
            .contains(&format!("compute trays cut: {};", t7.nvlink_cut.join(", "))),
        "{}",
        links.summary
    );
    // Every rack's NMX-T is a scrape target.
    let targets = r.live.targets();
    for rack in &inv.racks {
        assert!(
            targets.iter().any(|t| t.url.ends_with(&format!(
                "/nmxt/{}/xcset/nvlink_domain_telemetry",
                rack.name
            )) && t.last_success_ms.is_some()),
            "{}",
            rack.name
        );
    }
    r.stop().await.expect("stop");
}
