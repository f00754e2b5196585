//! `cargo xtask bench scale [--nodes N]`.

use std::env;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{exporters_and_scraper, metric_value, proc_usage, spawn_sim};
use crate::util::{cargo, free_port, run_cmd, step, target_dir, wait_healthy, Guard, Result};

/// The baseline every size is measured against in the same invocation.
const BASE_NODES: u32 = 2048;
/// With `--nodes`: every this many nodes' exporters are scraped over HTTP.
const SCRAPE_EVERY: u32 = 8;

/// Without arguments: Gantry at 2,048 nodes / 16,384 GPUs scraping every node's exporters
/// every 10 s (served by a second Gantry, not measured), everything included: scrape,
/// parse, aggregation, hot window, rollups, alerts, SSE with one client.
///
/// With `--nodes N`: one Gantry at 2,048 nodes, then one at N, each simulating its fleet
/// and scraping every eighth node's exporters over HTTP at 10 s (`sim.scrape_every`; the
/// rest read directly): one machine cannot serve and scrape every exporter of 16,384
/// nodes. Mean CPU, RSS, the live tick's duration, and N against 2,048.
pub(crate) fn bench_scale(args: &[String]) -> Result {
    let secs: u64 = env::var("GANTRY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let nodes: Option<u32> = match args {
        [] => None,
        [flag, n] if flag == "--nodes" => Some(
            n.parse()
                .ok()
                .filter(|n| (1..=16_384).contains(n))
                .ok_or(format!("--nodes {n:?}: a node count from 1 to 16384"))?,
        ),
        _ => return Err("usage: cargo xtask bench scale [--nodes N]".into()),
    };
    step("building gantry (release)");
    run_cmd(cargo().args(["build", "--release", "-p", "server", "--bin", "gantry"]))?;
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let Some(nodes) = nodes else {
        let (_a, _exporters, b, gantry) = exporters_and_scraper(BASE_NODES, &dir, "scale-")?;
        let m = measure(b, &gantry, secs, "2,048 nodes x (8 GPUs + BMC) every 10 s")?;
        println!(
            "gantry at 2,048 nodes: mean CPU {:.3} cores (goal: under 0.1), RSS {:.1} MiB, peak {:.1} MiB (goal: under 512 MiB)",
            m.cores, m.rss_mib, m.peak_mib
        );
        return Ok(());
    };
    let mut runs = Vec::new();
    for n in [BASE_NODES, nodes] {
        let (addr, gantry) = sampled_gantry(n, &dir)?;
        let what = format!(
            "{n} nodes, every {SCRAPE_EVERY}th scraped over HTTP at 10 s, the rest read directly"
        );
        runs.push((n, measure(addr, &gantry, secs, &what)?));
    }
    println!(
        "\nnodes    GPUs      CPU cores  RSS MiB  peak MiB  tick mean ms  tick max ms  scraped/s  hot window MiB"
    );
    for (n, m) in &runs {
        println!(
            "{n:<8} {:<9} {:<10.3} {:<8.1} {:<9.1} {:<13.1} {:<12.1} {:<10.0} {:.1}",
            n * 8,
            m.cores,
            m.rss_mib,
            m.peak_mib,
            m.tick_mean_ms,
            m.tick_max_ms,
            m.samples_per_s,
            m.hot_mib
        );
    }
    if let [(_, a), (n, b)] = runs.as_slice() {
        println!(
            "{n} against 2,048 nodes: CPU {:.2}x, peak RSS {:.2}x, tick {:.2}x (goal at 16,384: under 1 core and 2 GiB)",
            b.cores / a.cores,
            b.peak_mib / a.peak_mib,
            b.tick_mean_ms / a.tick_mean_ms
        );
    }
    println!("(each Gantry also runs its simulator and serves the share it scrapes: its own cost is included)");
    Ok(())
}

struct Measured {
    cores: f64,
    rss_mib: f64,
    peak_mib: f64,
    tick_mean_ms: f64,
    tick_max_ms: f64,
    samples_per_s: f64,
    hot_mib: f64,
}

/// One release Gantry simulating `nodes`, scraping every [`SCRAPE_EVERY`]th node's own
/// exporters at 10 s.
fn sampled_gantry(nodes: u32, dir: &std::path::Path) -> Result<(SocketAddr, Guard)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let child = spawn_sim(
        nodes,
        addr,
        &dir.join(format!("scale-{nodes}.db")),
        &[
            ("GANTRY_SIM_SCRAPE_EVERY", SCRAPE_EVERY.to_string()),
            ("GANTRY_SCRAPE_INTERVAL_MS", "10000".into()),
        ],
    )?;
    let guard = Guard(Some(child), "gantry");
    wait_healthy(addr, 300)?;
    Ok((addr, guard))
}

/// One live client, as a browser would hold.
fn live_client(addr: SocketAddr) -> Result<JoinHandle<()>> {
    let mut sse = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    write!(
        sse,
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    Ok(std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while matches!(sse.read(&mut buf), Ok(n) if n > 0) {}
    }))
}

/// `gantry` at `addr` with one live client: settled for 30 s, then measured for `secs`,
/// its tick's duration read each second. Stops it.
fn measure(addr: SocketAddr, gantry: &Guard, secs: u64, what: &str) -> Result<Measured> {
    let client = live_client(addr)?;
    let pid = gantry.0.as_ref().map(Child::id).unwrap_or(0);
    step("letting the first full scrape round and the history settle (30 s)");
    std::thread::sleep(Duration::from_secs(30));
    let u0 = proc_usage(pid).ok_or("cannot read gantry's /proc")?;
    let s0 = metric_value(addr, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    step(&format!("measuring for {secs} s: {what}"));
    let mut ticks = Vec::new();
    for _ in 0..secs {
        std::thread::sleep(Duration::from_secs(1));
        if let Some(t) = metric_value(addr, "/metrics", "gantry_live_tick_duration_seconds") {
            ticks.push(t * 1000.0);
        }
    }
    let u1 = proc_usage(pid).ok_or("cannot read gantry's /proc")?;
    let s1 = metric_value(addr, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    let hot = metric_value(addr, "/metrics", "gantry_hot_window_bytes").unwrap_or(0.0);
    // Stop it (the live client's stream ends with it).
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = client.join();
    Ok(Measured {
        cores: (u1.0 - u0.0) / secs as f64,
        rss_mib: u1.1 as f64 / 1024.0,
        peak_mib: u1.2 as f64 / 1024.0,
        tick_mean_ms: ticks.iter().sum::<f64>() / ticks.len().max(1) as f64,
        tick_max_ms: ticks.iter().copied().fold(0.0, f64::max),
        samples_per_s: (s1 - s0) / secs as f64,
        hot_mib: hot / (1024.0 * 1024.0),
    })
}
