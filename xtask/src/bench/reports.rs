//! `cargo xtask bench reports`.

use std::fs;
use std::process::Command;

use crate::postgres::Postgres;
use crate::util::{cargo, run_cmd, step, target_dir, Result};

/// A 90-day report over 4,096 GPUs from the hourly rollups, on SQLite and on a private
/// PostgreSQL (release build; see `server/examples/bench_reports.rs`).
pub(crate) fn bench_reports() -> Result {
    step("building the report benchmark (release)");
    run_cmd(cargo().args([
        "build",
        "--release",
        "-p",
        "server",
        "--example",
        "bench_reports",
    ]))?;
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let db = dir.join("reports.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let pg = Postgres::start()?;
    step("90 days x 4,096 GPUs: each grouping's report, 7 runs");
    run_cmd(
        Command::new(target_dir().join("release/examples/bench_reports"))
            .arg(format!("sqlite://{}", db.display()))
            .arg(&pg.url),
    )
}
