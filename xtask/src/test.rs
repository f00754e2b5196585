//! `cargo xtask test [--fuzz]`: fmt, clippy, the fence, unit and integration tests, the
//! browser tests, and optionally the fuzz targets.

use std::env;
use std::fs;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bootstrap::{bootstrap, ensure_apt, WASM_TARGET};
use crate::fence::fence;
use crate::postgres::Postgres;
use crate::slurm::{SlurmCluster, SLURMRESTD_PORT};
use crate::util::{
    cargo, free_port, have, output, random_password, root, run_cmd, step, target_dir, wait_healthy,
    Guard, Result,
};

/// cargo-fuzz targets under server/fuzz.
const FUZZ_TARGETS: &[&str] = &["exposition"];

pub(crate) fn test(args: &[String]) -> Result {
    let started = Instant::now();
    let with_fuzz = args.iter().any(|a| a == "--fuzz");
    bootstrap(true, false)?;

    step("rustfmt");
    run_cmd(cargo().args(["fmt", "--all", "--", "--check"]))?;
    step("clippy, server build (-D warnings)");
    run_cmd(cargo().args([
        "clippy",
        "-p",
        "server",
        "-p",
        "exposition",
        "-p",
        "xtask",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    step("clippy, browser build (-D warnings)");
    run_cmd(cargo().args([
        "clippy",
        "-p",
        "app",
        "--lib",
        "--target",
        WASM_TARGET,
        "--no-default-features",
        "--features",
        "hydrate",
        "--",
        "-D",
        "warnings",
    ]))?;
    fence()?;

    ensure_apt(
        &["prometheus"],
        "the PromQL source is tested against a real Prometheus",
    )?;
    ensure_apt(
        &["victoria-metrics"],
        "the PromQL source is tested against a real VictoriaMetrics (the test starts its own)",
    )?;
    ensure_apt(
        &["prometheus-alertmanager"],
        "incidents are sent to a real Alertmanager (the test starts its own)",
    )?;
    ensure_apt(
        &["slapd"],
        "LDAP sign-in is tested against a real OpenLDAP (the tests start their own slapd)",
    )?;
    let pg = Postgres::start()?;
    let slurm = SlurmCluster::start(false)?;
    step("unit and integration tests (SQLite, PostgreSQL, Prometheus, Slurm)");
    run_cmd(cargo().args(["test", "-p", "app", "--features", "ssr", "--lib"]))?;
    run_cmd(cargo().args(["test", "-p", "exposition"]))?;
    let server_tests = |args: &[&str]| {
        let mut c = cargo();
        c.args(args)
            .env("GANTRY_TEST_PG_URL", &pg.url)
            .env("GANTRY_TEST_SLURM_CONF", &slurm.conf)
            .env(
                "GANTRY_TEST_SLURM_REST_URL",
                format!("http://127.0.0.1:{SLURMRESTD_PORT}"),
            )
            .env(
                "GANTRY_TEST_SLURM_REST_SOCKET",
                format!("unix:{}", slurm.socket.display()),
            )
            .env("GANTRY_TEST_SLURM_JWT", &slurm.jwt);
        c
    };
    run_cmd(&mut server_tests(&["test", "-p", "server"]))?;
    // Tests that must run alone, one at a time: they count every client of slurmctld, or
    // stop the shared PostgreSQL or slurmctld.
    run_cmd(&mut server_tests(&[
        "test",
        "-p",
        "server",
        "--test",
        "integration",
        "--",
        "--ignored",
        "--test-threads=1",
    ]))?;
    // The OpenAPI document against the server, by schemathesis as every role.
    crate::schemathesis::schemathesis(&[])?;
    // The soak for one minute: a busy release server answers everything (errors fail it).
    crate::soak::soak(&["--minutes".into(), "1".into()])?;
    // The Debian package of that release binary (it carries its site), installed into a
    // scratch root and started as its systemd unit would.
    let deb = crate::dist::package()?;
    crate::dist::check_package(&deb)?;

    ensure_apt(&["chromium"], "browser tests run in Debian's Chromium")?;
    crate::site::build(false, false)?;
    // Slurm and PostgreSQL stay up for the browser tests of the real source and replicas.
    end2end(&slurm.conf, &pg.url)?;
    drop(pg);
    drop(slurm);
    if with_fuzz {
        fuzz(Duration::from_secs(60))?;
    }
    println!("\nall checks passed in {} s", started.elapsed().as_secs());
    Ok(())
}

/// Runs every cargo-fuzz target for `each` (nightly, cargo-fuzz installed if missing).
fn fuzz(each: Duration) -> Result {
    let toolchains = output(Command::new("rustup").args(["toolchain", "list"])).unwrap_or_default();
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        return Err("--fuzz needs a nightly toolchain (cargo-fuzz uses -Z flags): rustup toolchain install nightly".into());
    }
    if !have("cargo-fuzz") {
        step("installing cargo-fuzz (runs libFuzzer targets; compiles once, a few minutes)");
        run_cmd(cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    for &target in FUZZ_TARGETS {
        let corpus = target_dir().join("fuzz-corpus").join(target);
        fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        step(&format!("fuzzing {target} for {} s", each.as_secs()));
        run_cmd(
            Command::new("cargo")
                .current_dir(root())
                .args([
                    "+nightly",
                    "fuzz",
                    "run",
                    "--fuzz-dir",
                    "server/fuzz",
                    target,
                ])
                .arg(&corpus)
                .arg(root().join("server/fuzz/seeds").join(target))
                .arg("--")
                .arg(format!("-max_total_time={}", each.as_secs()))
                .arg("-rss_limit_mb=2048")
                .env_remove("CARGO")
                .env_remove("RUSTUP_TOOLCHAIN"),
        )?;
    }
    Ok(())
}

/// Serves a fresh Gantry and runs Playwright against it (hydrated and JavaScript-off projects).
fn end2end(slurm_conf: &std::path::Path, pg_url: &str) -> Result {
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let tmp = env::temp_dir().join(format!("gantry-e2e-{}-{port}", std::process::id()));
    fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    step(&format!(
        "browser tests: Gantry on {addr}, Playwright in /usr/bin/chromium"
    ));
    let exe = target_dir().join("debug").join("gantry");
    let db = format!("sqlite://{}", tmp.join("gantry.db").display());
    // Users for the action tests; the browser tests read the password from the environment.
    let password = random_password();
    crate::util::add_users(
        &exe,
        &db,
        &password,
        &[
            ("operator1", "operator"),
            ("viewer1", "viewer"),
            ("manager1", "manager"),
            ("admin1", "admin"),
            // For the admin page's test to change, disable and delete.
            ("spare1", "viewer"),
        ],
    )?;
    let log = fs::File::create(tmp.join("gantry.log")).map_err(|e| e.to_string())?;
    let child = Command::new(&exe)
        .current_dir(root())
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", &db)
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("GANTRY_SITE_ROOT", root().join("target").join("site"))
        .env("RUST_LOG", "warn")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let server = Guard(Some(child), "gantry");
    wait_healthy(addr, 60)
        .map_err(|e| format!("{e}; log in {}", tmp.join("gantry.log").display()))?;
    let res = run_cmd(
        Command::new("npx")
            .args(["playwright", "test"])
            .current_dir(root().join("end2end"))
            .env("GANTRY_URL", format!("http://{addr}"))
            .env("GANTRY_E2E_PASSWORD", &password)
            // For tests that need a Gantry of their own (xid.hydrated.spec.ts,
            // real-source.hydrated.spec.ts on the real Slurm, replicas.hydrated.spec.ts on
            // it and PostgreSQL).
            .env("GANTRY_BIN", &exe)
            .env("GANTRY_TEST_SLURM_CONF", slurm_conf)
            .env("GANTRY_TEST_PG_URL", pg_url)
            .env("GANTRY_SITE_ROOT", root().join("target").join("site"))
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
    );
    drop(server);
    if res.is_ok() {
        let _ = fs::remove_dir_all(&tmp);
    } else {
        eprintln!("server log kept in {}", tmp.join("gantry.log").display());
    }
    res
}
