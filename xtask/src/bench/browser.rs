//! `cargo xtask bench browser`, and the release gantry the Chromium benchmarks measure.

use std::env;
use std::fs;
use std::net::SocketAddr;
use std::process::Command;

use crate::bootstrap::{bootstrap, ensure_apt};
use crate::util::{free_port, root, step, target_dir, wait_healthy, Guard, Result};

/// `/racks` (or the live page GANTRY_BENCH_PAGE names) of 2,048 simulated nodes in
/// headless Chromium (release builds): first contentful paint, main-thread time per 1 Hz
/// update, bytes per SSE update. With `GANTRY_BENCH_PROFILE=nvl72`, the same page of 113
/// GB200 NVL72 racks (2,034 trays, 8,136 GPUs, the simulator's largest; coolant on every
/// rack head) is measured after the HGX floor in the same run, and their ratios printed.
pub(crate) fn bench_browser() -> Result {
    let secs = env::var("GANTRY_BENCH_SECONDS").unwrap_or_else(|_| "60".into());
    let page = env::var("GANTRY_BENCH_PAGE").unwrap_or_else(|_| "/racks".into());
    if !page.starts_with('/') {
        return Err(format!(
            "GANTRY_BENCH_PAGE must be a path such as /topology, not {page:?}"
        ));
    }
    let profile = env::var("GANTRY_BENCH_PROFILE").unwrap_or_else(|_| "hgx".into());
    if !["hgx", "nvl72"].contains(&profile.as_str()) {
        return Err(format!(
            "GANTRY_BENCH_PROFILE is hgx or nvl72, not {profile:?}"
        ));
    }
    let fleet = match env::var("GANTRY_BENCH_NODES") {
        Ok(n) => Some(
            n.parse::<u32>()
                .ok()
                .filter(|n| (1..=16_384).contains(n))
                .ok_or_else(|| {
                    format!("GANTRY_BENCH_NODES is a node count up to 16384, not {n:?}")
                })?,
        ),
        Err(_) => None,
    };
    let hgx = measure(&page, &secs, "HGX, 2,048 nodes (16,384 GPUs)", &[])?;
    if let Some(n) = fleet {
        let big = measure(
            &page,
            &secs,
            &format!("HGX, {n} nodes ({} GPUs)", 8 * u64::from(n)),
            &[("GANTRY_SIM_NODES", n.to_string())],
        )?;
        compare(&page, &format!("{n} nodes"), &big, "2,048 nodes", &hgx);
    }
    if profile == "hgx" {
        return Ok(());
    }
    let nvl72 = measure(
        &page,
        &secs,
        "GB200 NVL72, 113 racks (2,034 trays, 8,136 GPUs: the most the simulator makes)",
        &[
            ("GANTRY_SIM_PROFILE", "nvl72".into()),
            ("GANTRY_SIM_NODES", "2034".into()),
        ],
    )?;
    compare(&page, "NVL72", &nvl72, "HGX", &hgx);
    Ok(())
}

/// Run `a` against run `b` of the same page: the steady window's average and p95 per
/// update, bytes per update, first contentful paint and the page's HTML, as ratios.
fn compare(page: &str, a_name: &str, a: &str, b_name: &str, b: &str) {
    step(&format!(
        "{page}: {a_name} against {b_name}, measured in this run"
    ));
    for key in [
        "steady_avg_ms",
        "steady_p95_ms",
        "delta_kb_avg",
        "fcp_ms",
        "html_kb",
    ] {
        match (figure(a, key), figure(b, key)) {
            (Some(x), Some(y)) if y > 0.0 => {
                println!(
                    "  {key:<14} {a_name} {x:>8.1}  {b_name} {y:>8.1}  ratio {:.2}",
                    x / y
                )
            }
            (x, y) => println!("  {key:<14} {a_name} {x:?}  {b_name} {y:?}"),
        }
    }
}

/// One figure of a `BENCH key=value ...` line.
fn figure(line: &str, key: &str) -> Option<f64> {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| v.is_finite())
}

/// One run of `bench/browser.mjs` against a fresh release gantry with `extra`
/// environment: its report printed, its figures returned.
fn measure(page: &str, secs: &str, what: &str, extra: &[(&str, String)]) -> Result<String> {
    let (addr, server) = browser_bench_gantry("browser.db", extra)?;
    step(&format!(
        "measuring {page} of {what} in Chromium: two windows of {secs} s (after going live, then steady)"
    ));
    let out = Command::new("node")
        .arg("bench/browser.mjs")
        .current_dir(root().join("end2end"))
        .env("GANTRY_URL", format!("http://{addr}"))
        .env("GANTRY_BENCH_SECONDS", secs)
        .env("GANTRY_BENCH_PAGE", page)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run node bench/browser.mjs: {e}"))?;
    drop(server);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut figures = None;
    for line in text.lines() {
        match line.strip_prefix("BENCH ") {
            Some(f) => figures = Some(f.to_string()),
            None => println!("{line}"),
        }
    }
    if !out.status.success() {
        return Err(format!("bench/browser.mjs failed ({})", out.status));
    }
    figures.ok_or_else(|| "bench/browser.mjs printed no figures".to_string())
}

/// For the Chromium benchmarks: release builds, Debian's Chromium, and a release gantry
/// with 2,048 simulated nodes (16,384 GPUs) read directly, on a fresh database `db` under
/// the bench directory, with `extra` environment; returns its address once healthy.
pub(crate) fn browser_bench_gantry(
    db: &str,
    extra: &[(&str, String)],
) -> Result<(SocketAddr, Guard)> {
    // One site build per run, however many gantries it starts.
    static BUILT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !BUILT.swap(true, std::sync::atomic::Ordering::SeqCst) {
        bootstrap(true, true)?;
        crate::site::build(true, false)?;
        ensure_apt(
            &["chromium"],
            "the browser benchmarks run Debian's Chromium",
        )?;
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", dir.join(db).display()));
    }
    let nodes = extra
        .iter()
        .find(|(k, _)| *k == "GANTRY_SIM_NODES")
        .map_or("2048", |(_, v)| v.as_str());
    step(&format!(
        "starting gantry (release) with {nodes} simulated nodes{}",
        extra
            .iter()
            .filter(|(k, _)| *k != "GANTRY_SIM_NODES")
            .map(|(k, v)| format!(", {k}={v}"))
            .collect::<String>()
    ));
    let mut c = Command::new(target_dir().join("release").join("gantry"));
    c.current_dir(root())
        .env("GANTRY_LISTEN", addr.to_string())
        .env(
            "GANTRY_DATABASE_URL",
            format!("sqlite://{}", dir.join(db).display()),
        )
        .env("GANTRY_SITE_ROOT", root().join("target").join("site"))
        .env("GANTRY_SIM_NODES", nodes)
        .env("GANTRY_TELEMETRY", "direct")
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("RUST_LOG", "warn");
    for (k, v) in extra.iter().filter(|(k, _)| *k != "GANTRY_SIM_NODES") {
        c.env(k, v);
    }
    let child = c.spawn().map_err(|e| format!("cannot start gantry: {e}"))?;
    let server = Guard(Some(child), "gantry");
    // (A fleet's simulator replays its first minutes before it serves.)
    wait_healthy(addr, 600)?;
    Ok((addr, server))
}
