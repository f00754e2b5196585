//! `cargo xtask bench timeline`.

use std::process::Command;
use std::time::Duration;

use super::browser::browser_bench_gantry;
use super::metric_value;
use crate::util::{root, run_cmd, step, Result};

/// `/timeline` of 2,048 simulated nodes over 7 days in headless Chromium (release builds):
/// the simulator starts 7 days back at 7 days per minute, then the 7-day window is timed
/// on the server and in the browser, with a pan earlier.
pub(crate) fn bench_timeline() -> Result {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let week_ms = 7 * 86_400_000u64;
    let (addr, server) = browser_bench_gantry(
        "timeline.db",
        &[
            ("GANTRY_SIM_START_MS", (now_ms - week_ms).to_string()),
            ("GANTRY_SIM_SPEED", "10080".into()),
        ],
    )?;
    step("simulating 7 days (a minute at 7 days a minute)");
    std::thread::sleep(Duration::from_secs(62));
    let dropped = metric_value(addr, "/metrics", "gantry_store_queue_dropped_total").unwrap_or(0.0);
    println!("store writes dropped while simulating the week: {dropped}");
    step("measuring /timeline?hours=168 on the server and in Chromium");
    let res = run_cmd(
        Command::new("node")
            .arg("bench/timeline.mjs")
            .current_dir(root().join("end2end"))
            .env("GANTRY_URL", format!("http://{addr}")),
    );
    drop(server);
    res
}
