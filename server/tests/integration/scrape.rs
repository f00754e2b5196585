//! Scraping over real sockets: the simulator's exporters, and targets that misbehave.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use server::telemetry::dcgm;
use server::telemetry::scrape::{Client, ScrapeConfig, ScrapeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{self, get};

/// What a fake target does with each connection.
#[derive(Clone)]
enum Behaviour {
    /// Reads the request, then holds the connection open and says nothing.
    Hang,
    /// Writes these bytes and closes.
    Raw(Vec<u8>),
    /// A 200 with a chunked body that goes on for up to 200 MB.
    Endless,
}

async fn target(b: Behaviour) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let b = b.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                match b {
                    Behaviour::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
                    Behaviour::Raw(bytes) => {
                        let _ = s.write_all(&bytes).await;
                    }
                    Behaviour::Endless => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let line =
                            "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"x\"} 41\n".repeat(1500);
                        let chunk = format!("{:x}\r\n{line}\r\n", line.len());
                        for _ in 0..(200 << 20) / chunk.len() {
                            if s.write_all(chunk.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

fn response(ctype: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn client(timeout_ms: u64, max: usize) -> Client {
    Client::new(
        ScrapeConfig {
            timeout: Duration::from_millis(timeout_ms),
            max_body_bytes: max,
            gzip: true,
            ..ScrapeConfig::default()
        },
        system_tls(),
    )
}

fn system_tls() -> std::sync::Arc<rustls::ClientConfig> {
    server::tls::client_config(None).expect("tls")
}

/// A target that keeps connections alive and answers every request on them; returns its
/// address and the number of connections it has accepted.
async fn keep_alive_target() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let body = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"x\"} 41\n";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let mut pending = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        if s.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// Two rounds of `n` scrapes in flight at once; the connections the target accepted.
async fn two_rounds(max_idle_per_host: usize, n: usize) -> usize {
    let (addr, accepted) = keep_alive_target().await;
    let c = Client::new(
        ScrapeConfig {
            max_idle_per_host,
            gzip: false,
            ..ScrapeConfig::default()
        },
        system_tls(),
    );
    for _ in 0..2 {
        let round: Vec<_> = (0..n)
            .map(|_| {
                let c = c.clone();
                let url = format!("http://{addr}/metrics");
                tokio::spawn(async move { c.fetch(&url).await })
            })
            .collect();
        for r in round {
            r.await.expect("task").expect("scrape");
        }
        // Connections go back to the pool once their response is read.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    accepted.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test]
async fn scrapes_in_flight_reuse_their_connections_next_round() {
    // A pool as large as the scrapes in flight: the second round reconnects nothing.
    assert_eq!(two_rounds(8, 8).await, 8);
    // A smaller pool drops what it cannot keep, and the next round connects again.
    assert!(two_rounds(2, 8).await > 8);
}

#[tokio::test]
async fn the_simulators_exporters_scrape_like_real_ones() {
    let cfg = support::test_config(support::sqlite_url(), 64, 1.0, 200);
    let r = server::serve::start(cfg).await.expect("server");
    support::wait_ready(&r).await;
    for _ in 0..100 {
        if r.live.sim_frame().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let c = client(5_000, 1 << 20);
    let base = format!("http://{}/sim/exporter", r.addr);
    let body = c
        .fetch(&format!("{base}/dcgm/gpu001/metrics"))
        .await
        .expect("dcgm");
    let scrape = dcgm::decode(&body, "gpu001");
    assert_eq!(scrape.line_errors, 0);
    assert_eq!(scrape.gpus.len(), 8);
    assert!(scrape
        .gpus
        .iter()
        .all(|g| g.host == "gpu001" && g.get(dcgm::Field::PowerWatts).is_some()));
    let ipmi = c
        .fetch(&format!("{base}/ipmi/gpu001/metrics"))
        .await
        .expect("ipmi");
    assert!(String::from_utf8_lossy(&ipmi).contains("ipmi_dcmi_power_consumption_watts "));
    let node = c
        .fetch(&format!("{base}/node/gpu001/metrics"))
        .await
        .expect("node_exporter");
    assert!(String::from_utf8_lossy(&node)
        .contains("node_infiniband_port_data_received_bytes_total{device=\"mlx5_0\",port=\"1\"} "));
    // Scraped every tick, the counters become InfiniBand traffic per switch domain on the
    // topology: present for every leaf, and moving where multi-node jobs run.
    let leaves = support::leaf_ib_traffic(&r, 100, Duration::from_millis(50)).await;
    assert!(
        !leaves.is_empty() && leaves.iter().all(|(_, ib)| ib.is_some()),
        "{leaves:?}"
    );
    assert!(
        leaves.iter().any(|(_, b)| b.unwrap_or(0.0) >= 1e9),
        "{leaves:?}"
    );
    assert_eq!(
        c.fetch(&format!("{base}/dcgm/gpu999/metrics")).await,
        Err(ScrapeError::Status(404))
    );
    // The simulated cluster's down node (gpu061) has no exporter answering.
    assert_eq!(
        c.fetch(&format!("{base}/dcgm/gpu061/metrics")).await,
        Err(ScrapeError::Status(503))
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_target_that_never_answers_times_out_without_holding_up_others() {
    let hang = target(Behaviour::Hang).await;
    let good = target(Behaviour::Raw(response(
        "text/plain; version=0.0.4",
        "",
        b"up 1\n",
    )))
    .await;
    let c = client(800, 1 << 20);
    let started = Instant::now();
    let (hang_url, good_url) = (
        format!("http://{hang}/metrics"),
        format!("http://{good}/metrics"),
    );
    let (h, g) = tokio::join!(c.fetch(&hang_url), async {
        let t = Instant::now();
        (c.fetch(&good_url).await, t.elapsed())
    });
    assert_eq!(h, Err(ScrapeError::Timeout(800)));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(g.0.as_deref(), Ok(&b"up 1\n"[..]));
    assert!(
        g.1 < Duration::from_millis(500),
        "the good target waited {:?}",
        g.1
    );
}

#[tokio::test]
async fn a_huge_body_is_cut_off_at_the_cap() {
    let endless = target(Behaviour::Endless).await;
    let started = Instant::now();
    let res = client(10_000, 4 << 20)
        .fetch(&format!("http://{endless}/metrics"))
        .await;
    assert_eq!(res, Err(ScrapeError::TooLarge(4 << 20)));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn html_errors_refusals_gzip_and_garbage() {
    let c = client(2_000, 1 << 20);
    let html = target(Behaviour::Raw(response(
        "text/html; charset=utf-8",
        "",
        b"<html>login</html>",
    )))
    .await;
    assert_eq!(
        c.fetch(&format!("http://{html}/metrics")).await,
        Err(ScrapeError::NotMetrics("text/html; charset=utf-8".into()))
    );
    let err = target(Behaviour::Raw(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec(),
    ))
    .await;
    assert_eq!(
        c.fetch(&format!("http://{err}/metrics")).await,
        Err(ScrapeError::Status(500))
    );

    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    assert!(matches!(
        c.fetch(&format!("http://{closed}/metrics")).await,
        Err(ScrapeError::Connect(_))
    ));
    assert!(matches!(
        c.fetch("ftp://example/metrics").await,
        Err(ScrapeError::BadUrl(_))
    ));

    use std::io::Write;
    let text = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"n1\"} 55\n";
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).expect("gzip");
    let gz = enc.finish().expect("gzip");
    let gzt = target(Behaviour::Raw(response(
        "text/plain",
        "Content-Encoding: gzip\r\n",
        &gz,
    )))
    .await;
    assert_eq!(
        c.fetch(&format!("http://{gzt}/metrics")).await.as_deref(),
        Ok(text.as_bytes())
    );

    // Bytes that are not UTF-8: fetched as bytes; the parser reports the lines, no panic.
    let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let jt = target(Behaviour::Raw(response("text/plain", "", &junk))).await;
    let body = c
        .fetch(&format!("http://{jt}/metrics"))
        .await
        .expect("bytes");
    let scrape = dcgm::decode(&body, "x");
    assert!(scrape.gpus.is_empty());
    assert!(scrape.line_errors > 0);
}

#[tokio::test]
async fn a_live_node_whose_exporters_fail_marks_its_rack_incomplete() {
    let cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    let r = server::serve::start(cfg).await.expect("server");
    support::wait_ready(&r).await;
    while r.live.sim_frame().is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let frame = r.live.sim_frame().expect("frame");
    let base = format!("http://{}/sim/exporter", r.addr);
    let mut targets = server::telemetry::ingest::targets(
        &frame.inventory,
        &format!("{base}/dcgm/{{node}}/metrics"),
        &format!("{base}/ipmi/{{node}}/metrics"),
    );
    // gpu003 is up, but its exporters are unreachable.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port");
    targets[2].gpu_url = format!("http://{closed}/metrics");
    targets[2].bmc_url = format!("http://{closed}/metrics");
    let mut ing = server::telemetry::ingest::Ingest::new(
        client(2_000, 1 << 20),
        targets,
        server::telemetry::ingest::PowerMapping::default(),
        8,
    );
    let now = server::clock::wall_now_ms();
    let round = ing.scrape_all(now).await;
    // gpu003's two, and the two of the simulated cluster's down node (gpu016 at 16 nodes).
    assert_eq!(round.failed, 4);
    let rd = &frame.readings;
    let view = ing.readings(
        &frame.inventory,
        now,
        rd.at_ms,
        2_000,
        rd.nodes.iter().map(|n| (n.name.clone(), n.state)),
        rd.jobs.clone(),
    );
    let ov = server::aggregate::overview(&frame.inventory, &view, 1, 200, now);
    assert_eq!(ov.racks[0].nodes_not_reporting, 1);
    assert_eq!(ov.racks[1].nodes_not_reporting, 0);
    // Its GPUs are there, and missing, not zero.
    let silent: Vec<_> = view.gpus.iter().filter(|g| g.node == "gpu003").collect();
    assert_eq!(silent.len(), 8);
    assert!(silent
        .iter()
        .all(|g| g.power_watts.is_none() && g.temp_celsius.is_none()));
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn configured_exporter_targets_are_scraped_with_jitter() {
    // Gantry A only serves its simulated exporters; Gantry B scrapes them as a site's
    // configured targets. Both simulate the same frozen cluster, so B's view equals A's truth.
    // B makes up no telemetry of its own (its simulator only schedules), so it has no truth.
    let mut a_cfg = support::test_config(support::sqlite_url(), 16, 1e-6, 200);
    a_cfg.telemetry = server::config::TelemetryKind::Direct;
    let a = server::serve::start(a_cfg).await.expect("gantry A");
    support::wait_ready(&a).await;
    let mut b_cfg = support::test_config(support::sqlite_url(), 16, 1e-6, 200);
    b_cfg.gpu_exporter_url = Some(format!(
        "http://{}/sim/exporter/dcgm/{{node}}/metrics",
        a.addr
    ));
    b_cfg.bmc_exporter_url = Some(format!(
        "http://{}/sim/exporter/ipmi/{{node}}/metrics",
        a.addr
    ));
    b_cfg.scrape_interval_ms = Some(1_000);
    let b = server::serve::start(b_cfg).await.expect("gantry B");
    support::wait_ready(&b).await;
    let mut matched = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(tick) = b.live.current() else {
            continue;
        };
        let Some(truth) = a.live.truth(None) else {
            continue;
        };
        if tick.overview.summary.power_watts == truth.power_watts
            && tick
                .overview
                .racks
                .iter()
                .all(|r| r.nodes_not_reporting == 0)
        {
            matched = true;
            break;
        }
    }
    assert!(matched, "B never showed A's exporters completely");
    assert!(b.live.truth(None).is_none(), "B simulates no telemetry");
    let t = get(b.addr, "/api/targets").await.json();
    let urls: Vec<&str> = t["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter_map(|h| h["url"].as_str())
        .collect();
    assert_eq!(urls.len(), 32);
    assert!(urls
        .iter()
        .all(|u| u.starts_with(&format!("http://{}/sim/exporter/", a.addr))));
    b.stop().await.expect("stop B");
    a.stop().await.expect("stop A");
}

/// Configured exporters are scraped by their own task: when every one of them accepts the
/// connection and never answers, the live tick still comes every 200 ms (scraping inside
/// the tick would hold each one for the 800 ms scrape deadline), and every target reports
/// the timeout.
#[tokio::test]
async fn hanging_exporters_never_hold_up_the_live_tick() {
    let hang = target(Behaviour::Hang).await;
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1e-6, 200);
    cfg.gpu_exporter_url = Some(format!("http://{hang}/dcgm/{{node}}"));
    cfg.bmc_exporter_url = Some(format!("http://{hang}/ipmi/{{node}}"));
    cfg.scrape_interval_ms = Some(1_000);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let seq = || r.live.current().map(|t| t.overview.seq).unwrap_or(0);
    let (s0, t0) = (seq(), Instant::now());
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let ticks = seq() - s0;
    assert!(
        ticks >= 8,
        "{ticks} ticks in {:?} with every exporter hanging",
        t0.elapsed()
    );
    let mut timed_out = 0;
    for _ in 0..40 {
        let t = get(r.addr, "/api/targets").await.json();
        let all = t["targets"].as_array().cloned().unwrap_or_default();
        timed_out = all
            .iter()
            .filter(|h| {
                h["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("no complete answer within 800 ms"))
            })
            .count();
        if all.len() == 32 && timed_out == 32 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(timed_out, 32, "every target says it timed out");
    // Nothing was made up: the hanging nodes are missing, not zero.
    let tick = r.live.current().expect("tick");
    assert!(tick.overview.nodes.iter().all(|n| n.power_watts.is_none()));
    r.stop().await.expect("stop");
}
