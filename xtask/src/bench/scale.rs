//! `cargo xtask bench scale`.

use std::env;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

use super::{exporters_and_scraper, metric_value, proc_usage};
use crate::util::{cargo, run_cmd, step, target_dir, Result};

/// Gantry at 2,048 nodes / 16,384 GPUs scraping every node's exporters every 10 s (served by
/// a second Gantry, not measured), everything included: scrape, parse, aggregation, hot
/// window, rollups, alerts, SSE with one client. Mean CPU (cores) and peak RSS.
pub(crate) fn bench_scale() -> Result {
    let secs: u64 = env::var("GANTRY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    step("building gantry (release)");
    run_cmd(cargo().args(["build", "--release", "-p", "server", "--bin", "gantry"]))?;
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (_a, _exporters, b, gantry) = exporters_and_scraper(2048, &dir, "scale-")?;
    // One live client, as a browser would hold.
    let mut sse = TcpStream::connect(b).map_err(|e| e.to_string())?;
    write!(
        sse,
        "GET /api/live HTTP/1.1\r\nHost: {b}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let sse_reader = std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while matches!(sse.read(&mut buf), Ok(n) if n > 0) {}
    });
    let pid = gantry.0.as_ref().map(Child::id).unwrap_or(0);
    step("letting the first full scrape round and the history settle (30 s)");
    std::thread::sleep(Duration::from_secs(30));
    let u0 = proc_usage(pid).ok_or("cannot read gantry's /proc")?;
    let s0 = metric_value(b, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    step(&format!(
        "measuring for {secs} s: 2,048 nodes x (8 GPUs + BMC) every 10 s"
    ));
    std::thread::sleep(Duration::from_secs(secs));
    let u1 = proc_usage(pid).ok_or("cannot read gantry's /proc")?;
    let s1 = metric_value(b, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    let series = metric_value(b, "/metrics", "gantry_hot_window_bytes").unwrap_or(0.0);
    drop(gantry);
    let _ = sse_reader.join();
    let cores = (u1.0 - u0.0) / secs as f64;
    println!(
        "samples scraped: {:.0} ({:.0} per second)",
        s1 - s0,
        (s1 - s0) / secs as f64
    );
    println!("hot window: {:.1} MiB", series / (1024.0 * 1024.0));
    println!(
        "gantry at 2,048 nodes: mean CPU {cores:.3} cores (goal: under 0.1), RSS {:.1} MiB, peak {:.1} MiB (goal: under 512 MiB)",
        u1.1 as f64 / 1024.0,
        u1.2 as f64 / 1024.0
    );
    Ok(())
}
