//! The PromQL path against a real VictoriaMetrics (Debian's `victoria-metrics`), the store
//! a fleet-sized site runs: it scrapes the simulator's exporters, and Gantry's overview
//! through it equals the simulator's truth, rack by rack. When the store lags (it answers,
//! but its newest samples are old), Gantry shows the data stale, never the old values as
//! current.
//!
//! 2,048 nodes in four halls (16,384 GPUs): far past the wall of the first PromQL path,
//! whose one answer with every DCGM series (88 KB a node) passed the 16 MiB bound at about
//! 190 nodes; the GPUs are now read a field at a query (`telemetry::ingest::query_dcgm`).

use std::time::Duration;

use server::telemetry::promql::PromQl;
use server::telemetry::scrape::{Client, ScrapeConfig};

use crate::promql::{free_port, scrape_yml};
use crate::support;

fn victoria_metrics() -> Option<&'static str> {
    let bin = "/usr/bin/victoria-metrics";
    support::installed(
        std::path::Path::new(bin),
        "Debian's victoria-metrics",
        "apt-get install victoria-metrics",
    )
    .then_some(bin)
}

/// VictoriaMetrics scraping as `dir/scrape.yml` says, its data under `dir/data`, on
/// `port`, answering queries with no latency offset (its default holds the newest 30 s
/// back); killed when dropped.
fn start(bin: &str, dir: &std::path::Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new(bin)
        .arg(format!(
            "-promscrape.config={}",
            dir.join("scrape.yml").display()
        ))
        .arg(format!("-storageDataPath={}", dir.join("data").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-search.latencyOffset=0s")
        .arg("-retentionPeriod=1d")
        .arg("-loggerLevel=ERROR")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start victoria-metrics")
}

/// The store's count of DCGM power series now (0 when it does not answer).
async fn power_series(prom: &PromQl) -> i64 {
    prom.query("count(DCGM_FI_DEV_POWER_USAGE)", None)
        .await
        .ok()
        .and_then(|s| s.first().and_then(|s| s.points.last()).map(|p| p.1 as i64))
        .unwrap_or(0)
}

// Two worker threads: the simulator's exporters serve the store's 6,144 scrapes (about
// 65 KB each) every 10 s from this process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_reads_through_victoria_metrics_and_a_lagging_store_shows_stale() {
    let Some(bin) = victoria_metrics() else {
        return;
    };
    const NODES: u32 = 2048;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    // A frozen simulation: readings stay the same, so the store's samples must equal them.
    // The store scrapes every 10 s, which Gantry is told: a sample older than two of them
    // is stale.
    let mut cfg = support::test_config(support::sqlite_url(), NODES, 1e-6, 1000);
    cfg.telemetry = server::config::TelemetryKind::PromQl;
    cfg.promql_url = Some(url.clone());
    cfg.scrape_interval_ms = Some(10_000);
    let r = server::serve::start(cfg).await.expect("gantry");
    support::wait_ready(&r).await;

    let dir = std::env::temp_dir().join(format!("gantry-vm-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("scrape.yml"),
        scrape_yml(r.addr, NODES, "10s", "8s"),
    )
    .expect("config");
    let mut child = start(bin, &dir, port);
    let prom = PromQl::new(
        Client::new(
            ScrapeConfig::default(),
            server::tls::client_config(None).expect("tls"),
        ),
        &url,
    );

    // The overview through the store equals the truth at its tick: the cluster's power and
    // throttling, and each rack's power (VictoriaMetrics keeps 12 significant digits).
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let mut matched = false;
    let mut last = String::new();
    for _ in 0..720 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Some(tick) = r.live.current() else {
            continue;
        };
        let Some(truth) = r.live.truth(Some(tick.overview.seq)) else {
            continue;
        };
        let ov = &tick.overview;
        let racks_equal = ov.racks.len() == truth.racks.len()
            && ov
                .racks
                .iter()
                .zip(&truth.racks)
                .all(|(a, b)| a.power_watts.is_some_and(|p| close(p, b.power_watts)));
        last = format!(
            "overview power {} throttling {} against the truth's {} and {}",
            ov.summary.power_watts,
            ov.summary.gpus_throttling,
            truth.power_watts,
            truth.gpus_throttling
        );
        if racks_equal
            && close(ov.summary.power_watts, truth.power_watts)
            && ov.summary.gpus_throttling == truth.gpus_throttling
        {
            matched = true;
            break;
        }
    }
    if !matched {
        let up = prom
            .query("count by (job) (up == 1)", None)
            .await
            .map(|s| {
                format!(
                    "{:?}",
                    s.iter()
                        .map(|s| (s.labels.get("job").cloned(), s.points.last().map(|p| p.1)))
                        .collect::<Vec<_>>()
                )
            })
            .unwrap_or_else(|e| e.to_string());
        let targets = r
            .live
            .current()
            .map(|t| format!("{:?}", t.overview.summary))
            .unwrap_or_default();
        panic!(
            "the overview read through VictoriaMetrics never equalled the truth in 180 s: {last}; \
             the store's targets up: {up} (power series {}); summary {targets}",
            power_series(&prom).await
        );
    }

    // The store lags: restarted on the same data with nothing to scrape, it still answers
    // with the samples it holds (inside its lookback), but they grow old.
    // Stopped as a service manager would (SIGTERM: it flushes what it holds in memory).
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    if tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    std::fs::write(dir.join("scrape.yml"), "scrape_configs: []\n").expect("config");
    let _child = start(bin, &dir, port);
    let mut answers = 0;
    for _ in 0..300 {
        answers = power_series(&prom).await;
        if answers > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        answers > 0,
        "the restarted store answers with what it holds"
    );
    // Past Gantry's freshness (two 10 s intervals), a round of queries (every 5 s) and a
    // tick: every rack's power is unknown and its nodes counted as not reporting, though
    // the store still returns the old values.
    tokio::time::sleep(Duration::from_secs(27)).await;
    let ov = std::sync::Arc::clone(&r.live.current().expect("tick").overview);
    assert!(
        power_series(&prom).await > 0,
        "the store still returns the old samples as its latest"
    );
    let shown: Vec<(&str, Option<f64>)> = ov
        .racks
        .iter()
        .filter(|k| k.power_watts.is_some())
        .map(|k| (k.name.as_str(), k.power_watts))
        .collect();
    assert!(
        shown.is_empty(),
        "old samples shown as current power: {shown:?}"
    );
    assert!(
        ov.nodes
            .iter()
            .all(|n| n.power_watts.is_none() && n.sm_active_mean.is_none()),
        "old GPU samples shown as current"
    );
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}
