//! Alerts that do not flap, over real scrapes: Gantry A serves its simulator's exporters,
//! a proxy in front of one node's dcgm-exporter can make it report a double-bit ECC error
//! or stop answering, and Gantry B scrapes through it. A missed scrape leaves the alert
//! open, marked "no data"; a condition back after its resolution reopens the same row; the
//! open alerts group into incidents (a down node holds its exporters' alerts), and each
//! incident is one alert in a real Alertmanager (Debian's `prometheus-alertmanager`),
//! resolved there when it closes. On SQLite and PostgreSQL.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::alerts::receiver;
use crate::support;

/// The node the proxy meddles with (up in the 16-node simulated cluster).
pub(crate) const NODE: &str = "gpu003";

#[derive(Default)]
pub(crate) struct Knobs {
    /// NODE's GPU 0 reports a double-bit ECC error.
    ecc: AtomicBool,
    /// NODE's dcgm-exporter answers 503.
    drop: AtomicBool,
    /// Every BMC exporter answers 503.
    drop_bmc: AtomicBool,
    /// More nodes whose GPU 0 reports a double-bit ECC error (a storm).
    pub(crate) ecc_nodes: std::sync::Mutex<Vec<String>>,
}

impl Knobs {
    /// NODE's GPU 0 reports a double-bit ECC error from now on.
    pub(crate) fn ecc_on(&self) {
        self.ecc.store(true, Ordering::SeqCst);
    }
}

struct Proxy {
    upstream: SocketAddr,
    knobs: Arc<Knobs>,
}

async fn dcgm(State(p): State<Arc<Proxy>>, Path(node): Path<String>) -> axum::response::Response {
    if node == NODE && p.knobs.drop.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let r = support::get(p.upstream, &format!("/sim/exporter/dcgm/{node}/metrics")).await;
    if r.status != 200 {
        return StatusCode::from_u16(r.status)
            .unwrap_or(StatusCode::BAD_GATEWAY)
            .into_response();
    }
    let mut text = r.text();
    let ecc = (node == NODE && p.knobs.ecc.load(Ordering::SeqCst))
        || p.knobs.ecc_nodes.lock().is_ok_and(|v| v.contains(&node));
    if ecc {
        // The first GPU's aggregate double-bit count, as a failing HBM would show it.
        let mut done = false;
        text = text
            .lines()
            .map(|l| match l.rsplit_once(' ') {
                Some((series, _))
                    if !done && series.starts_with("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL{") =>
                {
                    done = true;
                    format!("{series} 2\n")
                }
                _ => format!("{l}\n"),
            })
            .collect();
        assert!(done, "the simulator's exporter prints the double-bit count");
    }
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn ipmi(State(p): State<Arc<Proxy>>, Path(node): Path<String>) -> axum::response::Response {
    if p.knobs.drop_bmc.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let r = support::get(p.upstream, &format!("/sim/exporter/ipmi/{node}/metrics")).await;
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
    (
        status,
        [("content-type", "text/plain; version=0.0.4")],
        r.text(),
    )
        .into_response()
}

async fn proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Knobs>) {
    let knobs = Arc::new(Knobs::default());
    let app = Router::new()
        .route("/dcgm/{node}/metrics", get(dcgm))
        .route("/ipmi/{node}/metrics", get(ipmi))
        .with_state(Arc::new(Proxy {
            upstream,
            knobs: Arc::clone(&knobs),
        }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (addr, knobs)
}

/// The ECC alert on NODE, whatever its state, newest first.
async fn ecc_alert(store: &server::store::Store) -> Option<app::views::AlertItem> {
    store
        .alerts(300)
        .await
        .expect("alerts")
        .into_iter()
        .find(|a| a.rule == "ecc_double_bit" && a.subject == format!("node:{NODE}"))
}

async fn until<F, Fut>(what: &str, secs: u64, mut f: F) -> app::views::AlertItem
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<app::views::AlertItem>>,
{
    for _ in 0..secs * 10 {
        if let Some(a) = f().await {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out ({secs} s) waiting for: {what}");
}

/// Gantry A, a frozen simulated cluster of 16 serving its exporters; the proxy in front
/// of A's dcgm-exporters; Gantry B on `db`, the same cluster's scheduler, scraping dcgm
/// through the proxy and the BMCs from A every 500 ms, with `tweak` applied. B's clock is
/// frozen like A's: the minute a critical alert must stay clear is the lifecycle's unit
/// test's; here three clear evaluations resolve it.
pub(crate) async fn through_proxy(
    db: String,
    tweak: impl FnOnce(&mut server::config::Config),
) -> (server::serve::Running, server::serve::Running, Arc<Knobs>) {
    let mut a_cfg = support::test_config(support::sqlite_url(), 16, 1e-6, 200);
    a_cfg.telemetry = server::config::TelemetryKind::Direct;
    let a = server::serve::start(a_cfg).await.expect("gantry A");
    support::wait_ready(&a).await;
    let (p, knobs) = proxy(a.addr).await;
    let mut cfg = support::test_config(db, 16, 1e-6, 200);
    cfg.gpu_exporter_url = Some(format!("http://{p}/dcgm/{{node}}/metrics"));
    cfg.bmc_exporter_url = Some(format!(
        "http://{}/sim/exporter/ipmi/{{node}}/metrics",
        a.addr
    ));
    cfg.scrape_interval_ms = Some(500);
    cfg.alerts.critical_clear_ms = 0;
    tweak(&mut cfg);
    let b = server::serve::start(cfg).await.expect("gantry B");
    support::wait_ready(&b).await;
    (a, b, knobs)
}

async fn no_flapping(db: String) {
    // A: a frozen simulated cluster serving its exporters; B: the same cluster's scheduler,
    // its telemetry scraped (dcgm through the proxy) every 500 ms.
    let (hook, got) = receiver().await;
    let (a, b, knobs) = through_proxy(db, |cfg| cfg.alerts.webhook_url = Some(hook)).await;

    knobs.ecc.store(true, Ordering::SeqCst);
    let fired = until("the ECC alert firing", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "firing")
    })
    .await;
    assert_eq!(fired.severity, "critical");
    assert_eq!((fired.flaps, fired.no_data_since_ms), (0, None));

    // Incidents: the simulated cluster's down node (gpu016) and its two exporters are one
    // incident, the node its cause; the ECC error is another, among the first (critical).
    let mut incidents = serde_json::Value::Null;
    for _ in 0..300 {
        incidents = support::get(b.addr, "/api/incidents").await.json();
        let down = incidents["incidents"].as_array().and_then(|v| {
            v.iter().find(|i| {
                i["cause"]["subject"] == "node:gpu016"
                    && i["alerts"].as_array().is_some_and(|a| a.len() == 2)
            })
        });
        if down.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let list = incidents["incidents"].as_array().expect("incidents");
    // Critical incidents come first, the newest of them first: the ECC error is among
    // them (the frozen cluster's warm rack B01 may fire its inlet alert before or after
    // it, as the first scrapes land).
    let at = list
        .iter()
        .position(|i| i["id"].as_i64() == Some(fired.id))
        .expect("the ECC incident");
    let first = &list[at];
    assert_eq!(first["severity"], "critical", "{incidents:#}");
    assert!(
        list[..at].iter().all(|i| i["severity"] == "critical"),
        "{incidents:#}"
    );
    assert_eq!(first["place"], format!("node {NODE}"));
    assert!(
        first["action"]
            .as_str()
            .is_some_and(|a| a.starts_with(&format!("Drain node {NODE}"))),
        "{first:#}"
    );
    let down = list
        .iter()
        .find(|i| i["cause"]["subject"] == "node:gpu016")
        .expect("the down node's incident");
    assert_eq!(down["cause"]["rule"], "node_not_responding", "{down:#}");
    let held: Vec<&str> = down["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter_map(|a| a["rule"].as_str())
        .collect();
    assert_eq!(held, ["target_down", "target_down"], "{down:#}");
    // The node's rack takes the incident's colour on the floor, its cause in words.
    let mut tile = None;
    for _ in 0..100 {
        tile = b.live.current().and_then(|t| {
            t.overview
                .racks
                .iter()
                .find(|r| r.incident.as_ref().is_some_and(|i| i.words.contains(NODE)))
                .cloned()
        });
        if tile.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tile = tile.expect("a rack tile naming the ECC incident");
    let inc = tile.incident.as_ref().expect("incident");
    assert_eq!(
        (inc.severity.as_str(), inc.link.as_str()),
        ("critical", "/nodes/gpu003")
    );
    assert_eq!(tile.severity(), app::live::Severity::Critical);
    // The top bar's badge counts the critical incidents (the live overview carries it).
    let want = list.iter().filter(|i| i["severity"] == "critical").count() as u32;
    assert!(want >= 1);
    let mut critical = 0;
    for _ in 0..100 {
        critical = b
            .live
            .current()
            .map(|t| t.overview.summary.alerts_critical)
            .unwrap_or(0);
        if critical == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(critical, want, "the critical incidents: {incidents:#}");
    // Every open alert is in exactly one incident.
    let open = b.store.open_alerts().await.expect("open");
    let mut in_incidents: Vec<i64> = list
        .iter()
        .flat_map(|i| {
            std::iter::once(i["id"].as_i64().unwrap_or(-1)).chain(
                i["alerts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| a["id"].as_i64().unwrap_or(-1)),
            )
        })
        .collect();
    in_incidents.sort();
    let mut ids: Vec<i64> = open.iter().map(|a| a.id).collect();
    ids.sort();
    assert_eq!(in_incidents, ids, "{incidents:#}");

    // The exporter stops answering: after two scrape intervals its readings are gone. The
    // alert stays open, the same row, marked; nothing is resolved.
    knobs.drop.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = ecc_alert(&b.store).await.expect("alert");
    assert_eq!(
        (still.id, still.state.as_str(), still.flaps),
        (fired.id, "firing", 0),
        "a missing reading resolved the alert: {still:?}"
    );
    assert!(still.no_data_since_ms.is_some(), "{still:?}");
    // The API says so too.
    let list = support::get(b.addr, "/api/alerts").await.json();
    let row = list["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|x| x["id"] == fired.id)
        .cloned()
        .expect("the alert in /api/alerts");
    assert!(row["no_data_since_ms"].as_i64().is_some(), "{row}");

    // Answering again, still failing: the mark goes, the row stays.
    knobs.drop.store(false, Ordering::SeqCst);
    let back = until("the no-data mark cleared", 30, || async {
        ecc_alert(&b.store)
            .await
            .filter(|a| a.no_data_since_ms.is_none())
    })
    .await;
    assert_eq!((back.id, back.state.as_str()), (fired.id, "firing"));

    // The count reads 0 again (a GPU replaced, counters reset): resolved...
    knobs.ecc.store(false, Ordering::SeqCst);
    let resolved = until("the ECC alert resolving", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "resolved")
    })
    .await;
    assert_eq!(resolved.id, fired.id);
    // Its page tells the story: closed, fired then resolved, in order.
    let story = support::get(b.addr, &format!("/api/incidents/{}", fired.id))
        .await
        .json();
    assert!(story["open"].is_null(), "{story:#}");
    let what: Vec<&str> = story["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter_map(|e| e["what"].as_str())
        .collect();
    assert!(
        what.first()
            .is_some_and(|w| w.starts_with("cause fired (critical, ecc_double_bit")),
        "{what:?}"
    );
    assert!(
        what.last()
            .is_some_and(|w| w.ends_with("resolved: the incident closed")),
        "{what:?}"
    );
    assert_eq!(
        support::get(b.addr, "/api/incidents/999999").await.status,
        404
    );
    // ...and back within the hold: the same alert again, one flap.
    knobs.ecc.store(true, Ordering::SeqCst);
    let again = until("the ECC alert reopened", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "firing")
    })
    .await;
    assert_eq!((again.id, again.flaps), (fired.id, 1), "{again:?}");
    let rows = b.store.alerts(300).await.expect("alerts");
    assert_eq!(
        rows.iter()
            .filter(|x| x.rule == "ecc_double_bit" && x.subject == format!("node:{NODE}"))
            .count(),
        1,
        "one row for one failure"
    );
    // The receiver heard: firing, resolved, firing; never a resolution while no data came.
    let mut events = Vec::new();
    for _ in 0..50 {
        events = got
            .lock()
            .expect("lock")
            .iter()
            .filter(|v| v["id"] == fired.id)
            .map(|v| v["event"].as_str().unwrap_or("").to_string())
            .collect();
        if events.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(events, ["firing", "resolved", "firing"]);
    b.stop().await.expect("stop B");
    a.stop().await.expect("stop A");
}

#[tokio::test]
async fn a_missed_scrape_never_resolves_and_a_flap_reopens_on_sqlite() {
    no_flapping(support::sqlite_url()).await;
}

#[tokio::test]
async fn a_missed_scrape_never_resolves_and_a_flap_reopens_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    no_flapping(url).await;
}

/// The NVL72 profile's coolant leak (60x: a warning 10 simulated minutes in, critical at
/// 12), its trays' BMCs scraped through the proxy, which then drops every BMC scrape for a
/// while: one alert for the leak, held open ("no data") through the gap, never resolved.
#[tokio::test]
async fn a_leak_stays_one_alert_through_dropped_scrapes_on_nvl72() {
    let nvl72 = |url: String, speed: f64| {
        let mut c = support::test_config(url, 144, speed, 1_000);
        c.sim.profile = server::sim::Profile::Nvl72;
        c
    };
    let mut a_cfg = nvl72(support::sqlite_url(), 60.0);
    a_cfg.telemetry = server::config::TelemetryKind::Direct;
    let a = server::serve::start(a_cfg).await.expect("gantry A");
    support::wait_ready(&a).await;
    let (p, knobs) = proxy(a.addr).await;
    let mut cfg = nvl72(support::sqlite_url(), 60.0);
    cfg.gpu_exporter_url = Some(format!(
        "http://{}/sim/exporter/dcgm/{{node}}/metrics",
        a.addr
    ));
    cfg.bmc_exporter_url = Some(format!("http://{p}/ipmi/{{node}}/metrics"));
    cfg.scrape_interval_ms = Some(1_000);
    let b = server::serve::start(cfg).await.expect("gantry B");
    support::wait_ready(&b).await;
    let leak = |a: &app::views::AlertItem| a.rule.starts_with("coolant_leak");
    let first = until("a coolant leak alert", 90, || async {
        b.store
            .alerts(300)
            .await
            .expect("alerts")
            .into_iter()
            .find(|x| leak(x) && x.state == "firing")
    })
    .await;
    // Five scrape intervals without a BMC reading: still firing, the same row, marked.
    // (A warning that turns critical is resolved for the critical alert: a new rule.)
    let dropped_ms = server::clock::wall_now_ms();
    knobs.drop_bmc.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let held = b.store.alert(first.id).await.expect("alert").expect("row");
    let critical = b
        .store
        .open_alerts()
        .await
        .expect("open")
        .into_iter()
        .find(|x| x.rule == "coolant_leak" && x.subject == first.subject && x.id != first.id);
    let first = match (held.state.as_str(), critical) {
        ("resolved", Some(c)) if held.rule == "coolant_leak_warning" => c,
        _ => held,
    };
    assert_eq!(
        first.state, "firing",
        "a missing reading resolved it: {first:?}"
    );
    assert!(first.no_data_since_ms.is_some(), "{first:?}");
    knobs.drop_bmc.store(false, Ordering::SeqCst);
    let restored_ms = server::clock::wall_now_ms();
    until("the leak alert's readings back", 30, || async {
        b.store
            .alert(first.id)
            .await
            .expect("alert")
            .filter(|x| x.no_data_since_ms.is_none())
    })
    .await;
    // One row per rule and rack, no flap, none resolved while the readings were missing
    // (or as they came back, when every reading was fresh again).
    let rows: Vec<_> = b
        .store
        .alerts(300)
        .await
        .expect("alerts")
        .into_iter()
        .filter(leak)
        .collect();
    for x in &rows {
        assert_eq!(x.flaps, 0, "{rows:#?}");
        let escalated = x.rule == "coolant_leak_warning"
            && rows
                .iter()
                .any(|y| y.rule == "coolant_leak" && y.subject == x.subject);
        let in_gap = !escalated
            && x.resolved_ms
                .is_some_and(|t| t >= dropped_ms + 1_500 && t <= restored_ms + 3_000);
        assert!(!in_gap, "resolved for want of readings: {rows:#?}");
    }
    let mut keys: Vec<_> = rows.iter().map(|x| (&x.rule, &x.subject)).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), rows.len(), "{rows:#?}");
    b.stop().await.expect("stop B");
    a.stop().await.expect("stop A");
}

/// Debian's Alertmanager on a free port with its data under a fresh directory (clustering
/// off), routing everything to a receiver that sends nothing; killed when dropped.
async fn alertmanager() -> Option<(tokio::process::Child, SocketAddr)> {
    let bin = "/usr/bin/prometheus-alertmanager";
    if !support::installed(
        std::path::Path::new(bin),
        "Debian's prometheus-alertmanager",
        "apt-get install prometheus-alertmanager",
    ) {
        return None;
    }
    let dir = std::env::temp_dir().join(format!(
        "gantry-am-{}-{}",
        std::process::id(),
        server::clock::wall_now_ms()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("alertmanager.yml"),
        "route:\n  receiver: nowhere\n  group_by: [incident]\nreceivers:\n  - name: nowhere\n",
    )
    .expect("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let child = tokio::process::Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.join("alertmanager.yml").display()
        ))
        .arg(format!("--storage.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--cluster.listen-address=")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start alertmanager");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok()
            && support::get(addr, "/-/ready").await.status == 200
        {
            return Some((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("alertmanager did not get ready on {addr}");
}

/// The incidents Alertmanager holds active: each alert's `incident` label, sorted.
async fn active_incidents(am: SocketAddr) -> Vec<(String, serde_json::Value)> {
    let alerts = support::get(
        am,
        "/api/v2/alerts?active=true&silenced=false&inhibited=false",
    )
    .await
    .json();
    let mut v: Vec<(String, serde_json::Value)> = alerts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["status"]["state"] == "active")
        .map(|a| {
            (
                a["labels"]["incident"].as_str().unwrap_or("").to_string(),
                a["labels"].clone(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Each open incident is one alert in a real Alertmanager, with its cause, severity, node
/// and cluster as labels; when the incident closes, Alertmanager has it resolved.
#[tokio::test]
async fn each_incident_is_one_alert_in_a_real_alertmanager() {
    let Some((_am_child, am)) = alertmanager().await else {
        return;
    };
    let (a, b, knobs) = through_proxy(support::sqlite_url(), |cfg| {
        cfg.alerts.alertmanager_url = Some(format!("http://{am}"))
    })
    .await;
    knobs.ecc.store(true, Ordering::SeqCst);
    let fired = until("the ECC alert firing", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "firing")
    })
    .await;
    // Alertmanager holds exactly Gantry's open incidents, one alert each.
    let mut last = (Vec::new(), Vec::new());
    let mut same = false;
    for _ in 0..150 {
        let list = support::get(b.addr, "/api/incidents").await.json();
        let mut ids: Vec<String> = list["incidents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["id"].to_string())
            .collect();
        ids.sort();
        let held: Vec<String> = active_incidents(am)
            .await
            .into_iter()
            .map(|x| x.0)
            .collect();
        // Once the down node's exporters are down too: three alerts, one incident.
        let down_whole = list["incidents"].as_array().into_iter().flatten().any(|i| {
            i["cause"]["subject"] == "node:gpu016"
                && i["alerts"].as_array().is_some_and(|a| a.len() == 2)
        });
        same = down_whole && ids == held && ids.contains(&fired.id.to_string());
        last = (ids, held);
        if same {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(same, "Gantry's incidents against Alertmanager's: {last:?}");
    let open = b.store.open_alerts().await.expect("open");
    assert!(
        open.len() > last.0.len(),
        "fewer notifications than alerts: {} alerts, {} incidents",
        open.len(),
        last.0.len()
    );
    let labels = active_incidents(am)
        .await
        .into_iter()
        .find(|x| x.0 == fired.id.to_string())
        .map(|x| x.1)
        .expect("the ECC incident in Alertmanager");
    assert_eq!(labels["cause"], "ecc_double_bit", "{labels}");
    assert_eq!(labels["alertname"], "ecc_double_bit", "{labels}");
    assert_eq!(labels["severity"], "critical", "{labels}");
    assert_eq!(labels["node"], NODE, "{labels}");
    assert!(
        labels["cluster"].as_str().is_some_and(|c| !c.is_empty()),
        "{labels}"
    );
    assert!(labels["rack"].as_str().is_some(), "{labels}");

    // The GPU is replaced: the incident closes in Gantry, and Alertmanager resolves it.
    knobs.ecc.store(false, Ordering::SeqCst);
    until("the ECC alert resolving", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "resolved")
    })
    .await;
    let mut gone = false;
    for _ in 0..100 {
        if !active_incidents(am)
            .await
            .iter()
            .any(|x| x.0 == fired.id.to_string())
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gone, "Alertmanager still has the closed incident active");
    b.stop().await.expect("stop B");
    a.stop().await.expect("stop A");
}
