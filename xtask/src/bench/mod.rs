//! `cargo xtask bench <size | ingest | browser | scale | reports | timeline | login-flood |
//! fanout>`: one module
//! per benchmark, and the measurements they share.

mod browser;
pub(crate) mod fanout;
mod ingest;
mod login_flood;
mod reports;
mod scale;
mod size;
mod timeline;

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::util::{free_port, http_get, output, target_dir, wait_healthy, Guard, Result};

pub(crate) fn bench(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some("size") => size::bench_size(),
        Some("ingest") => ingest::bench_ingest(),
        Some("browser") => browser::bench_browser(),
        Some("scale") => scale::bench_scale(&args[1..]),
        Some("reports") => reports::bench_reports(),
        Some("timeline") => timeline::bench_timeline(),
        Some("login-flood") => login_flood::bench_login_flood(),
        Some("fanout") => fanout::bench_fanout(),
        // The load generator `fanout` runs (a process of its own, release).
        Some("fanout-load") => fanout::fanout_load(&args[1..]),
        _ => Err(
            "usage: cargo xtask bench <size | ingest | browser | scale [--nodes N] | reports | timeline | login-flood | fanout>"
                .into(),
        ),
    }
}

/// CPU seconds (user + system) and (RSS, peak RSS) in KiB of a process, from /proc.
pub(crate) fn proc_usage(pid: u32) -> Option<(f64, u64, u64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = output(Command::new("getconf").arg("CLK_TCK"))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    Some((ticks / hz, kib("VmRSS:")?, kib("VmHWM:")?))
}

/// A metric's value from a Prometheus text page: the sum over its series (Prometheus 2.42
/// labels some counters, e.g. `{type="float"}`).
pub(crate) fn metric_value(addr: SocketAddr, path: &str, name: &str) -> Option<f64> {
    let body = http_get(addr, path).ok()?;
    let text = String::from_utf8_lossy(&body);
    let values: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let rest = if rest.starts_with('{') {
                &rest[rest.find('}')? + 1..]
            } else {
                rest
            };
            rest.strip_prefix(' ')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// A release Gantry on `addr` simulating `nodes` (a fixed start time) on a fresh SQLite
/// file `db`, with `extra` settings.
pub(crate) fn spawn_sim(
    nodes: u32,
    addr: SocketAddr,
    db: &Path,
    extra: &[(&str, String)],
) -> Result<Child> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let mut c = Command::new(target_dir().join("release").join("gantry"));
    c.env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("GANTRY_SIM_NODES", nodes.to_string())
        .env("GANTRY_SIM_START_MS", "1795968000000")
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().map_err(|e| format!("cannot start gantry: {e}"))
}

/// Two release gantries on one simulated cluster of `nodes` (a fixed start time): A reads
/// its simulator directly and serves its exporters; B scrapes them every 10 s as a site's
/// configured targets. Fresh databases `{prefix}exporters.db` and `{prefix}gantry.db` in
/// `dir`. Returns both addresses and processes once both are healthy.
pub(crate) fn exporters_and_scraper(
    nodes: u32,
    dir: &Path,
    prefix: &str,
) -> Result<(SocketAddr, Guard, SocketAddr, Guard)> {
    let (a, b) = (
        SocketAddr::from(([127, 0, 0, 1], free_port()?)),
        SocketAddr::from(([127, 0, 0, 1], free_port()?)),
    );
    let spawn = |addr: SocketAddr, db: &str, extra: &[(&str, String)]| {
        spawn_sim(nodes, addr, &dir.join(format!("{prefix}{db}")), extra)
    };
    let exporters = Guard(
        Some(spawn(
            a,
            "exporters.db",
            &[("GANTRY_TELEMETRY", "direct".into())],
        )?),
        "exporters",
    );
    wait_healthy(a, 180)?;
    let gantry = Guard(
        Some(spawn(
            b,
            "gantry.db",
            &[
                (
                    "GANTRY_GPU_EXPORTER_URL",
                    format!("http://{a}/sim/exporter/dcgm/{{node}}/metrics"),
                ),
                (
                    "GANTRY_BMC_EXPORTER_URL",
                    format!("http://{a}/sim/exporter/ipmi/{{node}}/metrics"),
                ),
                ("GANTRY_SCRAPE_INTERVAL_MS", "10000".into()),
            ],
        )?),
        "gantry",
    );
    wait_healthy(b, 180)?;
    Ok((a, exporters, b, gantry))
}
