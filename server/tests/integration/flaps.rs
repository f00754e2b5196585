//! Alerts that do not flap, over real scrapes: Gantry A serves its simulator's exporters,
//! a proxy in front of one node's dcgm-exporter can make it report a double-bit ECC error
//! or stop answering, and Gantry B scrapes through it. A missed scrape leaves the alert
//! open, marked "no data"; a condition back after its resolution reopens the same row.
//! On SQLite and PostgreSQL.

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
const NODE: &str = "gpu003";

#[derive(Default)]
struct Knobs {
    /// NODE's GPU 0 reports a double-bit ECC error.
    ecc: AtomicBool,
    /// NODE's dcgm-exporter answers 503.
    drop: AtomicBool,
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
    if node == NODE && p.knobs.ecc.load(Ordering::SeqCst) {
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

async fn proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Knobs>) {
    let knobs = Arc::new(Knobs::default());
    let app = Router::new()
        .route("/dcgm/{node}/metrics", get(dcgm))
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

async fn no_flapping(db: String) {
    // A: a frozen simulated cluster serving its exporters; B: the same cluster's scheduler,
    // its telemetry scraped (dcgm through the proxy) every 500 ms.
    let mut a_cfg = support::test_config(support::sqlite_url(), 16, 1e-6, 200);
    a_cfg.telemetry = server::config::TelemetryKind::Direct;
    let a = server::serve::start(a_cfg).await.expect("gantry A");
    support::wait_ready(&a).await;
    let (p, knobs) = proxy(a.addr).await;
    let (hook, got) = receiver().await;
    let mut cfg = support::test_config(db, 16, 1e-6, 200);
    cfg.gpu_exporter_url = Some(format!("http://{p}/dcgm/{{node}}/metrics"));
    cfg.bmc_exporter_url = Some(format!(
        "http://{}/sim/exporter/ipmi/{{node}}/metrics",
        a.addr
    ));
    cfg.scrape_interval_ms = Some(500);
    cfg.alerts.webhook_url = Some(hook);
    // B's clock is frozen like A's: the minute a critical alert must stay clear is the
    // lifecycle's unit test's; here three clear evaluations resolve it.
    cfg.alerts.critical_clear_ms = 0;
    let b = server::serve::start(cfg).await.expect("gantry B");
    support::wait_ready(&b).await;

    knobs.ecc.store(true, Ordering::SeqCst);
    let fired = until("the ECC alert firing", 30, || async {
        ecc_alert(&b.store).await.filter(|a| a.state == "firing")
    })
    .await;
    assert_eq!(fired.severity, "critical");
    assert_eq!((fired.flaps, fired.no_data_since_ms), (0, None));

    // The exporter stops answering: after two scrape intervals its readings are gone. The
    // alert stays open, the same row, marked; nothing is resolved.
    knobs.drop.store(true, Ordering::SeqCst);
    let marked = until("the ECC alert marked no data", 30, || async {
        ecc_alert(&b.store)
            .await
            .filter(|a| a.no_data_since_ms.is_some())
    })
    .await;
    assert_eq!((marked.id, marked.state.as_str()), (fired.id, "firing"));
    tokio::time::sleep(Duration::from_secs(3)).await;
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
