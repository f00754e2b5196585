//! `cargo xtask`: everything cargo alone cannot express.
//!
//! - `cargo xtask run [--release] [-- ARGS]`: install what is missing, build, serve the
//!   embedded default (SQLite + simulated cluster) on 127.0.0.1:3000.
//! - `cargo xtask test`: fmt, clippy (server and wasm builds separately), the dependency
//!   fence, unit and integration tests (SQLite and a private PostgreSQL), and Playwright
//!   in Debian's Chromium, hydrated and with JavaScript off.
//! - `cargo xtask test --fuzz`: all of the above, then each cargo-fuzz target for 60 s.
//! - `cargo xtask dist [--check]`: a release `gantry` carrying its site, and its Debian
//!   package (`target/dist/gantry_VERSION_ARCH.deb`); `--check` runs the package's test.
//! - `cargo xtask fixtures checkpoints`: save real checkpoints with the real frameworks
//!   (PyPI, in a virtual environment outside the checkout) into
//!   server/tests/fixtures/checkpoints, each with its loader's verdict; on demand, not in CI.
//! - `cargo xtask site [--release]`: build the `gantry` binary and its site (`target/site`)
//!   with cargo and wasm-bindgen, timing each step (no cargo-leptos needed).
//! - `cargo xtask bench size`: the release wasm + js, raw and brotli-compressed.
//! - `cargo xtask bench ingest`: parse throughput on 512 nodes' dcgm-exporter text.
//! - `cargo xtask bench browser | scale`: the live views in Chromium (with
//!   `GANTRY_BENCH_PROFILE=nvl72`, 113 NVL72 racks after the HGX floor, as ratios); 2,048
//!   nodes' CPU and RSS.
//! - `cargo xtask bench reports`: a 90-day report over 4,096 GPUs on SQLite and PostgreSQL.
//! - `cargo xtask bench timeline`: `/timeline` of 2,048 nodes over 7 days, server and Chromium.
//! - `cargo xtask bench login-flood`: a signed-in browser's latency and Gantry's RSS while
//!   1,000 wrong passwords a second arrive from 200 loopback addresses.
//!
//! - `cargo xtask schemathesis`: schemathesis (pinned, in a venv outside the checkout)
//!   against a fresh Gantry as every role, with all its checks (also a step of `test`).
//! - `cargo xtask soak [--minutes N]`: 1,000 live clients and 200 requests a second at
//!   2,048 nodes for N minutes (30 unless told): RSS growth and slope, errors, p99 per route.
//!
//! Tools are pinned and installed once into `~/.cargo/bin`; every install says what it
//! installs and why before it starts. One small dependency (socket2, to bind the login-flood attackers to many loopback
//! addresses, which std cannot), so it builds in seconds.

mod bench;
mod bootstrap;
mod dist;
mod fence;
mod fixtures;
mod postgres;
mod run;
mod schemathesis;
mod site;
mod slurm;
mod soak;
mod test;
mod util;

use std::env;
use std::process::ExitCode;

const USAGE: &str =
    "usage: cargo xtask <run [--release] [-- ARGS] | test | bench <size | ingest | browser | scale [--nodes N] | reports | timeline | login-flood | fanout> | soak [--minutes N] | site [--release] | dist [--check] | fixtures checkpoints | fence | bootstrap>";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    let res = match args.first().map(String::as_str) {
        Some("run") => run::run(rest),
        Some("test") => test::test(rest),
        Some("bench") => bench::bench(rest),
        Some("soak") => soak::soak(rest),
        Some("schemathesis") => schemathesis::schemathesis(rest),
        // The load generator `soak` runs (a process of its own, release).
        Some("soak-load") => soak::soak_load(rest),
        Some("fence") => fence::fence(),
        Some("fixtures") => fixtures::fixtures(rest),
        Some("slurm") => slurm::slurm_cmd(rest),
        Some("bootstrap") => bootstrap::bootstrap(true, true),
        Some("dist") => bootstrap::bootstrap(true, false)
            .and_then(|()| dist::dist())
            .and_then(|deb| {
                if rest.iter().any(|a| a == "--check") {
                    dist::check_package(&deb)?;
                }
                println!("\n{}", deb.display());
                Ok(())
            }),
        Some("site") => {
            let release = rest.iter().any(|a| a == "--release");
            bootstrap::bootstrap(release, false).and_then(|()| site::build(release, false))
        }
        _ => Err(USAGE.to_string()),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nxtask: {e}");
            ExitCode::FAILURE
        }
    }
}
