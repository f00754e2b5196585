//! `cargo xtask bench browser`, and the release gantry the Chromium benchmarks measure.

use std::env;
use std::fs;
use std::net::SocketAddr;
use std::process::Command;

use crate::bootstrap::{bootstrap, ensure_apt};
use crate::util::{free_port, root, run_cmd, step, target_dir, wait_healthy, Guard, Result};

/// `/racks` (or the live page GANTRY_BENCH_PAGE names) of 2,048 simulated nodes in
/// headless Chromium (release builds): first contentful paint, main-thread time per 1 Hz
/// update, bytes per SSE update.
pub(crate) fn bench_browser() -> Result {
    let secs = env::var("GANTRY_BENCH_SECONDS").unwrap_or_else(|_| "60".into());
    let page = env::var("GANTRY_BENCH_PAGE").unwrap_or_else(|_| "/racks".into());
    if !page.starts_with('/') {
        return Err(format!(
            "GANTRY_BENCH_PAGE must be a path such as /topology, not {page:?}"
        ));
    }
    let (addr, server) = browser_bench_gantry("browser.db", &[])?;
    step(&format!(
        "measuring {page} in Chromium: two windows of {secs} s (after going live, then steady)"
    ));
    let res = run_cmd(
        Command::new("node")
            .arg("bench/browser.mjs")
            .current_dir(root().join("end2end"))
            .env("GANTRY_URL", format!("http://{addr}"))
            .env("GANTRY_BENCH_SECONDS", &secs)
            .env("GANTRY_BENCH_PAGE", &page),
    );
    drop(server);
    res
}

/// For the Chromium benchmarks: release builds, Debian's Chromium, and a release gantry
/// with 2,048 simulated nodes (16,384 GPUs) read directly, on a fresh database `db` under
/// the bench directory, with `extra` environment; returns its address once healthy.
pub(crate) fn browser_bench_gantry(
    db: &str,
    extra: &[(&str, String)],
) -> Result<(SocketAddr, Guard)> {
    bootstrap(true, true)?;
    crate::site::build(true, false)?;
    ensure_apt(
        &["chromium"],
        "the browser benchmarks run Debian's Chromium",
    )?;
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", dir.join(db).display()));
    }
    step("starting gantry (release) with 2,048 simulated nodes (16,384 GPUs)");
    let mut c = Command::new(target_dir().join("release").join("gantry"));
    c.current_dir(root())
        .env("GANTRY_LISTEN", addr.to_string())
        .env(
            "GANTRY_DATABASE_URL",
            format!("sqlite://{}", dir.join(db).display()),
        )
        .env("GANTRY_SITE_ROOT", root().join("target").join("site"))
        .env("GANTRY_SIM_NODES", "2048")
        .env("GANTRY_TELEMETRY", "direct")
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("RUST_LOG", "warn");
    for (k, v) in extra {
        c.env(k, v);
    }
    let child = c.spawn().map_err(|e| format!("cannot start gantry: {e}"))?;
    let server = Guard(Some(child), "gantry");
    wait_healthy(addr, 120)?;
    Ok((addr, server))
}
