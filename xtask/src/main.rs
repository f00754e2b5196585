//! `cargo xtask`: everything cargo alone cannot express.
//!
//! - `cargo xtask run [--release] [-- ARGS]`: install what is missing, build, serve the
//!   embedded default (SQLite + simulated cluster) on 127.0.0.1:3000.
//! - `cargo xtask test`: fmt, clippy (server and wasm builds separately), the dependency
//!   fence, unit and integration tests (SQLite and a private PostgreSQL), and Playwright
//!   in Debian's Chromium, hydrated and with JavaScript off.
//! - `cargo xtask test --fuzz`: all of the above, then each cargo-fuzz target for 60 s.
//! - `cargo xtask bench size`: the release wasm + js, raw and brotli-compressed.
//! - `cargo xtask bench ingest`: parse throughput on 512 nodes' dcgm-exporter text.
//! - `cargo xtask bench browser | scale`: the live views in Chromium; 2,048 nodes' CPU and RSS.
//! - `cargo xtask bench reports`: a 90-day report over 4,096 GPUs on SQLite and PostgreSQL.
//! - `cargo xtask bench timeline`: `/timeline` of 2,048 nodes over 7 days, server and Chromium.
//!
//! Tools are pinned and installed once into `~/.cargo/bin`; every install says what it
//! installs and why before it starts. No dependencies: std only, so it builds in seconds.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const CARGO_LEPTOS_VERSION: &str = "0.3.10";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// cargo-fuzz targets under server/fuzz.
const FUZZ_TARGETS: &[&str] = &["exposition"];
/// Crates the browser build must never contain.
const FENCED: &[&str] = &[
    "sqlx",
    "sqlx-core",
    "axum",
    "tokio",
    "hyper",
    "plotters",
    "tower-http",
    "leptos_axum",
];
const USAGE: &str =
    "usage: cargo xtask <run [--release] [-- ARGS] | test | bench <size | ingest | browser | scale | reports | timeline> | fence | bootstrap>";

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    let res = match args.first().map(String::as_str) {
        Some("run") => run(rest),
        Some("test") => test(rest),
        Some("bench") => bench(rest),
        Some("fence") => fence(),
        Some("slurm") => slurm_cmd(rest),
        Some("bootstrap") => bootstrap(true, true),
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

// ---------------------------------------------------------------- helpers

fn root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

fn step(msg: &str) {
    println!("\n==> {msg}");
}

fn cargo() -> Command {
    let mut c = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

fn run_cmd(c: &mut Command) -> Result {
    let what = format!("{c:?}");
    let status = c.status().map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("failed ({status}): {what}"))
    }
}

fn output(c: &mut Command) -> Option<String> {
    let out = c.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|s| s.trim() == "0")
}

/// Runs `program args` as root: directly when we are root, else through `sudo -n`.
fn as_root<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    if is_root() {
        let mut c = Command::new(program);
        c.args(args);
        c
    } else {
        let mut c = Command::new("sudo");
        c.arg("-n").arg(program).args(args);
        c
    }
}

/// Installs missing Debian packages (`apt-get`), saying which and why.
fn ensure_apt(pkgs: &[&str], why: &str) -> Result {
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    step(&format!(
        "installing Debian packages {} ({why})",
        missing.join(" ")
    ));
    // Package scripts must not start services here: tests start their own.
    let guard = Path::new("/usr/sbin/policy-rc.d");
    let made_guard =
        !guard.exists() && is_root() && fs::write(guard, "#!/bin/sh\nexit 101\n").is_ok();
    if made_guard {
        let _ = run_cmd(Command::new("chmod").args(["755", "/usr/sbin/policy-rc.d"]));
    }
    let res =
        run_cmd(as_root("apt-get", ["-q", "update"]).env("DEBIAN_FRONTEND", "noninteractive"))
            .and_then(|()| {
                run_cmd(
                    as_root(
                        "apt-get",
                        [
                            "-q",
                            "-y",
                            "--no-install-recommends",
                            "-o",
                            "DPkg::Lock::Timeout=300",
                            "install",
                        ],
                    )
                    .args(&missing)
                    .env("DEBIAN_FRONTEND", "noninteractive"),
                )
            });
    if made_guard {
        let _ = fs::remove_file(guard);
    }
    res.map_err(|e| {
        format!(
            "{e}\n(install {} with apt-get as root, then retry)",
            missing.join(" ")
        )
    })
}

/// The version of `name` in Cargo.lock.
fn locked_version(name: &str) -> Result<String> {
    let lock =
        fs::read_to_string(root().join("Cargo.lock")).map_err(|e| format!("Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"") {
            if let Some(v) = lines.next().and_then(|v| v.strip_prefix("version = \"")) {
                return Ok(v.trim_end_matches('"').to_string());
            }
        }
    }
    Err(format!("{name} is not in Cargo.lock"))
}

/// Installs the pinned Rust-side tools (and, with `node`, the npm packages of end2end/).
fn bootstrap(node: bool, quiet_ok: bool) -> Result {
    let targets =
        output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if !targets.lines().any(|t| t.trim() == WASM_TARGET) {
        step("adding the wasm32-unknown-unknown target (the browser build)");
        run_cmd(
            Command::new("rustup")
                .args(["target", "add", WASM_TARGET])
                .current_dir(root()),
        )?;
    }
    let leptos = output(Command::new("cargo-leptos").arg("--version")).unwrap_or_default();
    if !leptos.contains(CARGO_LEPTOS_VERSION) {
        step(&format!(
            "installing cargo-leptos {CARGO_LEPTOS_VERSION} (builds server and wasm; compiles once, 10-25 min on 2 cores)"
        ));
        run_cmd(cargo().args([
            "install",
            "cargo-leptos",
            "--version",
            CARGO_LEPTOS_VERSION,
            "--locked",
            "--features",
            "no_downloads",
        ]))?;
    }
    let wbg = locked_version("wasm-bindgen")?;
    let have_wbg = output(Command::new("wasm-bindgen").arg("--version")).unwrap_or_default();
    if have_wbg.split_whitespace().nth(1) != Some(wbg.as_str()) {
        step(&format!(
            "installing wasm-bindgen-cli {wbg} (must equal wasm-bindgen in Cargo.lock; compiles once, ~5 min)"
        ));
        // --locked fails against the registry here; the version pin is what matters.
        run_cmd(cargo().args(["install", "wasm-bindgen-cli", "--version", &wbg, "--force"]))?;
    }
    if node {
        ensure_node()?;
    }
    if quiet_ok {
        println!("tools ready: cargo-leptos {CARGO_LEPTOS_VERSION}, wasm-bindgen {wbg}");
    }
    Ok(())
}

/// Node, npm and end2end/node_modules (Playwright, binaryen's wasm-opt), installed when
/// missing or when package-lock.json changed.
fn ensure_node() -> Result {
    if !have("node") || !have("npm") {
        ensure_apt(
            &["nodejs", "npm"],
            "browser tests and wasm-opt run on Node.js",
        )?;
    }
    let e2e = root().join("end2end");
    let stamp = e2e.join("node_modules").join(".gantry-lock");
    let lock = fs::read(e2e.join("package-lock.json"))
        .map_err(|e| format!("end2end/package-lock.json: {e}"))?;
    if fs::read(&stamp).ok().as_deref() != Some(lock.as_slice()) {
        step("installing end2end npm packages (@playwright/test, binaryen for wasm-opt); no browser download");
        run_cmd(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&e2e)
                .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
        )?;
        fs::write(&stamp, &lock).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok(())
}

/// PATH with end2end's npm binaries (wasm-opt) in front.
fn path_with_node_bin() -> std::ffi::OsString {
    let bin = root().join("end2end").join("node_modules").join(".bin");
    let mut parts = vec![bin];
    if let Some(p) = env::var_os("PATH") {
        parts.extend(env::split_paths(&p));
    }
    env::join_paths(parts).unwrap_or_default()
}

fn leptos_build(release: bool, frontend_only: bool) -> Result {
    step(&format!(
        "building with cargo-leptos ({}{})",
        if release { "release" } else { "dev" },
        if frontend_only {
            ", browser bundle only"
        } else {
            ", server and browser bundle"
        }
    ));
    let mut c = cargo();
    c.args(["leptos", "build"])
        .env("PATH", path_with_node_bin());
    if release {
        c.arg("--release");
    }
    if frontend_only {
        c.arg("--frontend-only");
    }
    run_cmd(&mut c)
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).ok()?;
    String::from_utf8_lossy(&head[..n])
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// Waits until Gantry at `addr` answers `/healthz` with 200, at most `secs`.
fn wait_healthy(addr: SocketAddr, secs: u64) -> Result {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while http_status(addr, "/healthz") != Some(200) {
        if Instant::now() > deadline {
            return Err(format!(
                "gantry at {addr} did not become healthy in {secs} s"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
struct Guard(Option<Child>, &'static str);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("{} did not stop in 10 s; killing it", self.1);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---------------------------------------------------------------- run

fn run(args: &[String]) -> Result {
    let release = args.iter().any(|a| a == "--release");
    let pass: Vec<&String> = args.iter().skip_while(|a| *a != "--").skip(1).collect();
    bootstrap(release, false)?;
    leptos_build(release, false)?;
    let data = root().join(".gantry");
    fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let exe = target_dir()
        .join(if release { "release" } else { "debug" })
        .join("gantry");
    let db = env::var("GANTRY_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", data.join("gantry.db").display()));
    // The demo: anonymous read-only viewing, and an operator and a manager to sign in as.
    // Their passwords are random, made once and kept in .gantry/demo-accounts.txt.
    let accounts = data.join("demo-accounts.txt");
    let known = fs::read_to_string(&accounts).unwrap_or_default();
    let mut lines = Vec::new();
    for role in ["operator", "manager"] {
        let password = known
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{role} ")))
            .map(str::to_string)
            .unwrap_or_else(random_password);
        run_cmd(
            Command::new(&exe)
                .current_dir(root())
                .args(["user", "add", role, "--role", role])
                .env("GANTRY_DATABASE_URL", &db)
                .env("GANTRY_PASSWORD", &password)
                .stdout(Stdio::null()),
        )?;
        lines.push(format!("{role} {password}"));
    }
    fs::write(&accounts, lines.join("\n") + "\n")
        .map_err(|e| format!("{}: {e}", accounts.display()))?;
    step("demo accounts (user password), also in .gantry/demo-accounts.txt");
    for l in &lines {
        println!("  {l}");
    }
    step("starting Gantry on its embedded default (SQLite in .gantry/, simulated 64-node cluster)");
    let mut c = Command::new(&exe);
    c.current_dir(root()).args(pass);
    c.env("GANTRY_DATABASE_URL", &db);
    if env::var_os("GANTRY_ANONYMOUS_READ").is_none() {
        c.env("GANTRY_ANONYMOUS_READ", "true");
    }
    if env::var_os("GANTRY_SITE_ROOT").is_none() {
        c.env("GANTRY_SITE_ROOT", root().join("target").join("site"));
    }
    run_cmd(&mut c)
}

/// 16 random bytes as hex, from the kernel.
fn random_password() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if let Err(e) = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)) {
        eprintln!("xtask: /dev/urandom: {e}");
        std::process::exit(1);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ---------------------------------------------------------------- test

/// A private PostgreSQL server for the tests, removed when dropped.
struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    url: String,
}

fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p): &(u32, PathBuf)| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

/// Runs a PostgreSQL tool as the `postgres` user when we are root (it refuses root).
fn pg_cmd(bin: &Path, tool: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    }
}

impl Postgres {
    fn start() -> Result<Postgres> {
        ensure_apt(
            &["postgresql"],
            "the storage tests run on PostgreSQL as well as SQLite",
        )?;
        let bin =
            pg_bin().ok_or("PostgreSQL server binaries not found under /usr/lib/postgresql")?;
        let port = free_port()?;
        let dir = env::temp_dir().join(format!("gantry-pg-{}-{port}", std::process::id()));
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if is_root() {
            run_cmd(Command::new("chown").args(["postgres:postgres"]).arg(&dir))?;
        }
        step(&format!(
            "starting a private PostgreSQL on 127.0.0.1:{port}"
        ));
        let data = dir.join("data");
        run_cmd(
            pg_cmd(&bin, "initdb")
                .args([
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--no-sync",
                    "-D",
                ])
                .arg(&data)
                .stdout(Stdio::null()),
        )?;
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            dir.display()
        );
        run_cmd(
            pg_cmd(&bin, "pg_ctl")
                .args(["-w", "-t", "60", "-D"])
                .arg(&data)
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-o", &opts, "start"])
                .stdout(Stdio::null()),
        )?;
        Ok(Postgres {
            dir,
            bin,
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = pg_cmd(&self.bin, "pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .arg("stop")
            .stdout(Stdio::null())
            .status();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn fence() -> Result {
    step("dependency fence: the wasm build contains no server crates");
    let tree = output(cargo().args([
        "tree",
        "-p",
        "app",
        "--target",
        WASM_TARGET,
        "--no-default-features",
        "--features",
        "hydrate",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]))
    .ok_or("cargo tree failed")?;
    let mut leaked: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| FENCED.contains(name))
        .collect();
    leaked.sort_unstable();
    leaked.dedup();
    if leaked.is_empty() {
        println!("ok: none of {} in the browser build", FENCED.join(", "));
        Ok(())
    } else {
        Err(format!(
            "the browser build pulls in server crates: {}",
            leaked.join(", ")
        ))
    }
}

fn test(args: &[String]) -> Result {
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
    let pg = Postgres::start()?;
    let slurm = SlurmCluster::start(false)?;
    step("unit and integration tests (SQLite, PostgreSQL, Prometheus, Slurm)");
    run_cmd(cargo().args(["test", "-p", "app", "--features", "ssr", "--lib"]))?;
    run_cmd(
        cargo()
            .args(["test", "-p", "server"])
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
            .env("GANTRY_TEST_SLURM_JWT", &slurm.jwt),
    )?;
    drop(slurm);
    drop(pg);

    ensure_apt(&["chromium"], "browser tests run in Debian's Chromium")?;
    leptos_build(false, false)?;
    end2end()?;
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
fn end2end() -> Result {
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
    for (name, role) in [
        ("operator1", "operator"),
        ("viewer1", "viewer"),
        ("manager1", "manager"),
    ] {
        run_cmd(
            Command::new(&exe)
                .args(["user", "add", name, "--role", role])
                .env("GANTRY_DATABASE_URL", &db)
                .env("GANTRY_PASSWORD", &password)
                .stdout(Stdio::null()),
        )?;
    }
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
            // For tests that need a Gantry of their own (xid.hydrated.spec.ts).
            .env("GANTRY_BIN", &exe)
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

// ---------------------------------------------------------------- slurm

/// A real 16-node Slurm 22.05 cluster on this machine (Debian's packages): gpu001-012
/// with 8 H100 each, gpu013-016 with 4 A100, one slurmd per node on its own port, GPUs as
/// GRES backed by /dev/null. A fresh state directory per start; stopped on drop.
struct SlurmCluster {
    dir: PathBuf,
    conf: PathBuf,
    /// slurmrestd's UNIX socket (local auth) and a root JWT for its TCP port.
    socket: PathBuf,
    jwt: String,
    /// slurmrestd processes, reaped on drop.
    children: Vec<std::process::Child>,
    keep: bool,
}

const SLURMCTLD_PORT: u16 = 6817;
/// slurmrestd with JWT auth (22.05: API v0.0.38).
const SLURMRESTD_PORT: u16 = 6820;

fn slurm_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "ClusterName=gantry-test\nSlurmctldHost=localhost\nSlurmctldPort={SLURMCTLD_PORT}\nSlurmUser=root\nSlurmdUser=root\n\
AuthType=auth/munge\nCredType=cred/munge\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={d}/jwt/jwt_hs256.key\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
SlurmctldPidFile={d}/run/slurmctld.pid\nSlurmdPidFile={d}/run/slurmd-%n.pid\nSlurmctldLogFile={d}/log/slurmctld.log\n\
SlurmdLogFile={d}/log/slurmd-%n.log\nSlurmctldDebug=info\nSlurmdDebug=info\nProctrackType=proctrack/linuxproc\n\
TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
JobCompType=jobcomp/filetxt\nJobCompLoc={d}/log/jobcomp.txt\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
DefMemPerCPU=4096\nSlurmdParameters=config_overrides\nReturnToService=2\nTreeWidth=65533\nMpiDefault=none\n\
MailProg=/bin/true\nMinJobAge=300\nSlurmdTimeout=30\nGresTypes=gpu\n\
NodeName=gpu[001-012] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-17012 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 Features=h100 State=UNKNOWN\n\
NodeName=gpu[013-016] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17013-17016 CPUs=32 Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=256000 Gres=gpu:a100:4 Features=a100 State=UNKNOWN\n\
PartitionName=gpu Nodes=gpu[001-016] Default=YES MaxTime=INFINITE State=UP\nPartitionName=debug Nodes=gpu[013-016] MaxTime=01:00:00 State=UP\n"
    )
}

fn slurm_run(conf: &Path, program: &str, args: &[&str]) -> Option<String> {
    output(Command::new(program).args(args).env("SLURM_CONF", conf))
}

impl SlurmCluster {
    fn start(keep: bool) -> Result<SlurmCluster> {
        ensure_apt(
            &["slurmctld", "slurmd", "slurm-client", "munge", "slurmrestd", "slurm-wlm-jwt-plugin"],
            "drain, resume and requeue are tested against a real Slurm, and reads through slurmrestd",
        )?;
        if !is_root() {
            return Err("the Slurm test cluster runs as root (SlurmUser=root, 16 slurmd)".into());
        }
        if TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], SLURMCTLD_PORT)),
            Duration::from_millis(300),
        )
        .is_ok()
        {
            return Err(format!(
                "port {SLURMCTLD_PORT} is taken: another slurmctld runs here (stop it: cargo xtask slurm down DIR)"
            ));
        }
        let dir = env::temp_dir().join(format!("gantry-slurm-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for port in [SLURMCTLD_PORT, SLURMRESTD_PORT] {
            if TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_millis(300),
            )
            .is_ok()
            {
                return Err(format!(
                    "port {port} is taken: stop what listens there first"
                ));
            }
        }
        for sub in ["etc", "state", "spool", "run", "log", "dev", "jwt", "rest"] {
            fs::create_dir_all(dir.join(sub)).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        for i in 0..8 {
            let link = dir.join("dev").join(format!("nvidia{i}"));
            std::os::unix::fs::symlink("/dev/null", &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
        let conf = dir.join("etc").join("slurm.conf");
        let dev = dir.join("dev").display().to_string();
        fs::write(&conf, slurm_conf(&dir)).map_err(|e| e.to_string())?;
        fs::write(
            dir.join("etc").join("gres.conf"),
            format!(
                "AutoDetect=off\nNodeName=gpu[001-012] Name=gpu Type=h100 File={dev}/nvidia[0-7]\nNodeName=gpu[013-016] Name=gpu Type=a100 File={dev}/nvidia[0-3]\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        // The JWT key: 32 random bytes, readable by root (SlurmUser) only.
        let key = dir.join("jwt").join("jwt_hs256.key");
        fs::write(&key, random_password()).map_err(|e| format!("{}: {e}", key.display()))?;
        run_cmd(Command::new("chmod").args(["600"]).arg(&key))?;
        // slurmrestd refuses to run as root or SlurmUser: it runs as `slurmrest`.
        if output(Command::new("id").arg("slurmrest")).is_none() {
            run_cmd(Command::new("useradd").args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "slurmrest",
            ]))?;
        }
        run_cmd(
            Command::new("chown")
                .arg("slurmrest:")
                .arg(dir.join("rest")),
        )?;
        step(&format!("starting a 16-node Slurm in {}", dir.display()));
        // munged: one per machine, shared; start it unless one answers. A socket file alone
        // proves nothing: /run is not a tmpfs here, so a dead munged leaves its socket behind.
        let munge_answers = Command::new("munge")
            .arg("-n")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !munge_answers {
            run_cmd(Command::new("install").args([
                "-d",
                "-o",
                "munge",
                "-g",
                "munge",
                "-m",
                "755",
                "/run/munge",
            ]))?;
            if !Path::new("/etc/munge/munge.key").exists() {
                run_cmd(
                    Command::new("mungekey").args(["--create", "--keyfile=/etc/munge/munge.key"]),
                )?;
                run_cmd(Command::new("chown").args(["munge:munge", "/etc/munge/munge.key"]))?;
            }
            // --force: remove the stale socket of a munged that died.
            run_cmd(Command::new("runuser").args([
                "-u",
                "munge",
                "--",
                "/usr/sbin/munged",
                "--force",
            ]))?;
        }
        let socket = dir.join("rest").join("slurmrestd.sock");
        let mut cluster = SlurmCluster {
            dir,
            conf,
            socket,
            jwt: String::new(),
            children: Vec::new(),
            keep,
        };
        let daemon = |args: &[&str]| {
            run_cmd(
                Command::new("setsid")
                    .args(args)
                    .env("SLURM_CONF", &cluster.conf)
                    .stdin(Stdio::null()),
            )
        };
        daemon(&["/usr/sbin/slurmctld", "-i"])?;
        for n in 1..=16 {
            daemon(&["/usr/sbin/slurmd", "-N", &format!("gpu{n:03}")])?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let states =
                slurm_run(&cluster.conf, "sinfo", &["-h", "-N", "-o", "%N %T"]).unwrap_or_default();
            // Nodes in two partitions are listed twice: count names.
            let mut idle: Vec<&str> = states
                .lines()
                .filter(|l| l.ends_with(" idle"))
                .filter_map(|l| l.split(' ').next())
                .collect();
            idle.sort_unstable();
            idle.dedup();
            let idle = idle.len();
            if idle == 16 {
                break;
            }
            if Instant::now() > deadline {
                let log = cluster.dir.join("log");
                let tail = |name: &str| {
                    let text = fs::read_to_string(log.join(name)).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(15)..].join("\n")
                };
                return Err(format!(
                    "Slurm did not bring 16 nodes to idle in 60 s:\n{states}\n\
                     --- slurmctld.log (last lines)\n{}\n--- slurmd-gpu001.log (last lines)\n{}\nlogs in {}",
                    tail("slurmctld.log"),
                    tail("slurmd-gpu001.log"),
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        println!("ok: 16 nodes idle (SLURM_CONF={})", cluster.conf.display());
        cluster.start_slurmrestd()?;
        Ok(cluster)
    }
}

impl SlurmCluster {
    /// Two slurmrestd (API v0.0.38 on 22.05), as `slurmrest`: JWT on TCP, local auth on a
    /// UNIX socket. Their pids go to run/ so teardown stops them with the rest.
    fn start_slurmrestd(&mut self) -> Result {
        let token = slurm_run(
            &self.conf,
            "scontrol",
            &["token", "username=root", "lifespan=14400"],
        )
        .ok_or("scontrol token failed (is the JWT key configured?)")?;
        self.jwt = token
            .trim()
            .strip_prefix("SLURM_JWT=")
            .ok_or_else(|| format!("unexpected scontrol token output: {token}"))?
            .to_string();
        let log = |name: &str| {
            fs::File::create(self.dir.join("log").join(name)).map_err(|e| e.to_string())
        };
        let listen_tcp = format!("127.0.0.1:{SLURMRESTD_PORT}");
        let listen_unix = format!("unix:{}", self.socket.display());
        for (auth, listen, name) in [
            ("rest_auth/jwt", listen_tcp.as_str(), "tcp"),
            ("rest_auth/local", listen_unix.as_str(), "unix"),
        ] {
            let out = log(&format!("slurmrestd-{name}.log"))?;
            let mut cmd = Command::new("setpriv");
            // JWT auth forwards each request's token; local auth must not expect one.
            if name == "tcp" {
                cmd.env("SLURM_JWT", "daemon");
            }
            let child = cmd
                .args([
                    "--reuid=slurmrest",
                    "--regid=slurmrest",
                    "--init-groups",
                    "/usr/sbin/slurmrestd",
                    "-s",
                    "openapi/v0.0.38",
                    "-a",
                    auth,
                    listen,
                ])
                .env("SLURM_CONF", &self.conf)
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(|e| e.to_string())?)
                .stderr(out)
                .spawn()
                .map_err(|e| format!("cannot start slurmrestd: {e}"))?;
            fs::write(
                self.dir.join("run").join(format!("slurmrestd-{name}.pid")),
                child.id().to_string(),
            )
            .map_err(|e| e.to_string())?;
            self.children.push(child);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(self.socket.exists()
            && TcpStream::connect_timeout(
                &SocketAddr::from(([127, 0, 0, 1], SLURMRESTD_PORT)),
                Duration::from_millis(200),
            )
            .is_ok())
        {
            if Instant::now() > deadline {
                return Err(format!(
                    "slurmrestd did not start in 20 s; logs in {}",
                    self.dir.join("log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!("ok: slurmrestd on {listen_tcp} (JWT) and {listen_unix} (local)");
        Ok(())
    }
}

/// Stops the daemons of a cluster directory: jobs first (their slurmstepd outlive slurmd),
/// then the controller and every slurmd, politely, then by force.
fn slurm_stop(dir: &Path) {
    let conf = dir.join("etc").join("slurm.conf");
    if let Some(ids) = slurm_run(&conf, "squeue", &["-h", "-o", "%i"]) {
        for id in ids.split_whitespace() {
            let _ = slurm_run(&conf, "scancel", &[id]);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && slurm_run(&conf, "squeue", &["-h", "-o", "%i"]).is_some_and(|s| !s.trim().is_empty())
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = slurm_run(&conf, "scontrol", &["shutdown"]);
    let pids: Vec<String> = fs::read_dir(dir.join("run"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| fs::read_to_string(e.path()).ok())
                .map(|s| s.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let alive = |pid: &str| Path::new("/proc").join(pid).exists();
    for signal in ["-TERM", "-KILL"] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && pids.iter().any(|p| alive(p)) {
            std::thread::sleep(Duration::from_millis(200));
        }
        for pid in pids.iter().filter(|p| alive(p)) {
            let _ = Command::new("kill")
                .args([signal, pid])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        slurm_stop(&self.dir);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// `cargo xtask slurm up` (prints SLURM_CONF and leaves it running) / `slurm down DIR`.
fn slurm_cmd(args: &[String]) -> Result {
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("up"), None) => {
            let c = SlurmCluster::start(true)?;
            println!(
                "export SLURM_CONF={}\nexport GANTRY_TEST_SLURM_CONF=$SLURM_CONF\nexport GANTRY_TEST_SLURM_REST_URL=http://127.0.0.1:{SLURMRESTD_PORT}\nexport GANTRY_TEST_SLURM_REST_SOCKET=unix:{}\nexport GANTRY_TEST_SLURM_JWT={}\nstop with: cargo xtask slurm down {}",
                c.conf.display(),
                c.socket.display(),
                c.jwt,
                c.dir.display()
            );
            Ok(())
        }
        (Some("down"), Some(dir)) => {
            slurm_stop(Path::new(dir));
            Ok(())
        }
        _ => Err("usage: cargo xtask slurm <up | down DIR>".into()),
    }
}

// ---------------------------------------------------------------- bench

fn bench(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some("size") => bench_size(),
        Some("ingest") => bench_ingest(),
        Some("browser") => bench_browser(),
        Some("scale") => bench_scale(),
        Some("reports") => bench_reports(),
        Some("timeline") => bench_timeline(),
        _ => Err(
            "usage: cargo xtask bench <size | ingest | browser | scale | reports | timeline>"
                .into(),
        ),
    }
}

/// A 90-day report over 4,096 GPUs from the hourly rollups, on SQLite and on a private
/// PostgreSQL (release build; see `server/examples/bench_reports.rs`).
fn bench_reports() -> Result {
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

/// GETs `path` and returns the body (the server answers with Content-Length and closes).
fn http_get(addr: SocketAddr, path: &str) -> Result<Vec<u8>> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP head")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
    }
    let body = &raw[split + 4..];
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(body.to_vec());
    }
    // Chunked: hex size line, data, CRLF; until a zero-size chunk.
    let (mut out, mut rest) = (Vec::new(), body);
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunk")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        let data = rest.get(eol + 2..eol + 2 + size).ok_or("truncated chunk")?;
        out.extend_from_slice(data);
        rest = rest.get(eol + 2 + size + 2..).ok_or("truncated chunk")?;
    }
}

/// `/racks` (or the live page GANTRY_BENCH_PAGE names) of 2,048 simulated nodes in
/// headless Chromium (release builds): first contentful paint, main-thread time per 1 Hz
/// update, bytes per SSE update.
fn bench_browser() -> Result {
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
fn browser_bench_gantry(db: &str, extra: &[(&str, String)]) -> Result<(SocketAddr, Guard)> {
    bootstrap(true, true)?;
    leptos_build(true, false)?;
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

/// `/timeline` of 2,048 simulated nodes over 7 days in headless Chromium (release builds):
/// the simulator starts 7 days back at 7 days per minute, then the 7-day window is timed
/// on the server and in the browser, with a pan earlier.
fn bench_timeline() -> Result {
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

/// Parse throughput on real-format input at 512 nodes x 8 GPUs: the simulator's
/// dcgm-exporter text for every node, parsed by a release build of the parser, against a
/// bare line-splitting baseline in the same run.
fn bench_ingest() -> Result {
    step("building gantry to produce the input");
    run_cmd(cargo().args(["build", "-p", "server", "--bin", "gantry"]))?;
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let child = Command::new(target_dir().join("debug").join("gantry"))
        .env("GANTRY_LISTEN", addr.to_string())
        .env(
            "GANTRY_DATABASE_URL",
            format!("sqlite://{}", dir.join("bench.db").display()),
        )
        .env("GANTRY_SIM_NODES", "512")
        .env("GANTRY_TELEMETRY", "direct")
        .env("RUST_LOG", "warn")
        .spawn()
        .map_err(|e| format!("cannot start gantry: {e}"))?;
    let server = Guard(Some(child), "gantry");
    wait_healthy(addr, 120)?;
    step("collecting dcgm-exporter text of 512 simulated nodes (8 x H100 each)");
    let mut all = Vec::new();
    for n in 1..=512 {
        match http_get(addr, &format!("/sim/exporter/dcgm/gpu{n:03}/metrics")) {
            Ok(body) => all.extend_from_slice(&body),
            // The simulated cluster's down nodes answer 503, as a dead exporter would not answer.
            Err(e) if e.contains("503") => {}
            Err(e) => return Err(e),
        }
    }
    drop(server);
    let input = dir.join("dcgm-512-nodes.prom");
    fs::write(&input, &all).map_err(|e| format!("{}: {e}", input.display()))?;
    step("parse throughput (release build of the parser)");
    run_cmd(
        cargo()
            .args([
                "run",
                "--quiet",
                "--release",
                "--manifest-path",
                "server/bench/Cargo.toml",
                "--",
            ])
            .arg(&input)
            .arg("5"),
    )?;
    bench_vs_prometheus(&dir)
}

/// CPU seconds (user + system) and (RSS, peak RSS) in KiB of a process, from /proc.
fn proc_usage(pid: u32) -> Option<(f64, u64, u64)> {
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
fn metric_value(addr: SocketAddr, path: &str, name: &str) -> Option<f64> {
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

/// Prometheus 2.42 (Debian) and Gantry, side by side in one run: each scrapes the same 512
/// simulated nodes (8 GPUs each, every 10 s) for GANTRY_BENCH_SECONDS (default 300).
/// Gantry is a release build and is measured whole: scraping, parsing, aggregation,
/// rollups, SSE, and the simulated scheduler it also runs.
/// Gantry at 2,048 nodes / 16,384 GPUs scraping every node's exporters every 10 s (served by
/// a second Gantry, not measured), everything included: scrape, parse, aggregation, hot
/// window, rollups, alerts, SSE with one client. Mean CPU (cores) and peak RSS.
fn bench_scale() -> Result {
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

/// Two release gantries on one simulated cluster of `nodes` (a fixed start time): A reads
/// its simulator directly and serves its exporters; B scrapes them every 10 s as a site's
/// configured targets. Fresh databases `{prefix}exporters.db` and `{prefix}gantry.db` in
/// `dir`. Returns both addresses and processes once both are healthy.
fn exporters_and_scraper(
    nodes: u32,
    dir: &Path,
    prefix: &str,
) -> Result<(SocketAddr, Guard, SocketAddr, Guard)> {
    let exe = target_dir().join("release").join("gantry");
    let (a, b) = (
        SocketAddr::from(([127, 0, 0, 1], free_port()?)),
        SocketAddr::from(([127, 0, 0, 1], free_port()?)),
    );
    let spawn = |addr: SocketAddr, db: &str, extra: &[(&str, String)]| -> Result<Child> {
        let db = dir.join(format!("{prefix}{db}"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = fs::remove_file(format!("{}{suffix}", db.display()));
        }
        let mut c = Command::new(&exe);
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

fn bench_vs_prometheus(dir: &Path) -> Result {
    let secs: u64 = env::var("GANTRY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    ensure_apt(
        &["prometheus"],
        "the ingest benchmark compares Gantry with Prometheus",
    )?;
    step("building gantry (release) for the side-by-side");
    run_cmd(cargo().args(["build", "--release", "-p", "server", "--bin", "gantry"]))?;
    let p = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    // A: the 512 nodes' exporters (not measured); B: Gantry scraping them every 10 s.
    let (a, exporters, b, gantry) = exporters_and_scraper(512, dir, "")?;
    // C: Prometheus scraping the same exporters, every 10 s.
    let targets: Vec<String> = (1..=512).map(|n| format!("\"gpu{n:03}\"")).collect();
    let job = |name: &str| {
        format!(
            "  - job_name: {name}\n    static_configs:\n      - targets: [{}]\n    relabel_configs:\n      - source_labels: [__address__]\n        target_label: __metrics_path__\n        replacement: /sim/exporter/{name}/${{1}}/metrics\n      - source_labels: [__address__]\n        target_label: instance\n      - target_label: __address__\n        replacement: {a}\n",
            targets.join(", ")
        )
    };
    let pdir = dir.join("prometheus");
    let _ = fs::remove_dir_all(&pdir);
    fs::create_dir_all(&pdir).map_err(|e| e.to_string())?;
    fs::write(
        pdir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 10s\n  scrape_timeout: 5s\nscrape_configs:\n{}{}",
            job("dcgm"),
            job("ipmi")
        ),
    )
    .map_err(|e| e.to_string())?;
    let prom = Guard(
        Some(
            Command::new("prometheus")
                .arg(format!(
                    "--config.file={}",
                    pdir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    pdir.join("data").display()
                ))
                .arg(format!("--web.listen-address={p}"))
                .arg("--log.level=warn")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start prometheus: {e}"))?,
        ),
        "prometheus",
    );
    let ids = |g: &Guard| g.0.as_ref().map(Child::id).unwrap_or(0);
    let (gpid, ppid) = (ids(&gantry), ids(&prom));
    // Let both reach steady state (one full interval), then measure.
    std::thread::sleep(Duration::from_secs(15));
    let g0 = proc_usage(gpid).ok_or("cannot read gantry's /proc")?;
    let p0 = proc_usage(ppid).ok_or("cannot read prometheus's /proc")?;
    let gs0 = metric_value(b, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    let ps0 =
        metric_value(p, "/metrics", "prometheus_tsdb_head_samples_appended_total").unwrap_or(0.0);
    step(&format!("measuring for {secs} s: Prometheus and Gantry each scrape 512 nodes x (8 GPUs + BMC) every 10 s"));
    std::thread::sleep(Duration::from_secs(secs));
    let g1 = proc_usage(gpid).ok_or("cannot read gantry's /proc")?;
    let p1 = proc_usage(ppid).ok_or("cannot read prometheus's /proc")?;
    let gs1 = metric_value(b, "/metrics", "gantry_scrape_samples_total").unwrap_or(0.0);
    let ps1 =
        metric_value(p, "/metrics", "prometheus_tsdb_head_samples_appended_total").unwrap_or(0.0);
    let series = metric_value(p, "/metrics", "prometheus_tsdb_head_series").unwrap_or(0.0);
    drop(prom);
    drop(gantry);
    drop(exporters);
    let (gcpu, pcpu) = (g1.0 - g0.0, p1.0 - p0.0);
    let (gsamples, psamples) = (gs1 - gs0, ps1 - ps0);
    let per = |cpu: f64, n: f64| if n > 0.0 { cpu / n * 1e6 } else { f64::NAN };
    println!("series in Prometheus's head: {series:.0}");
    println!(
        "prometheus: {pcpu:7.2} CPU s  {psamples:10.0} samples  {:6.2} us CPU/sample  RSS {:6.1} MiB (peak {:6.1} MiB)",
        per(pcpu, psamples),
        p1.1 as f64 / 1024.0,
        p1.2 as f64 / 1024.0
    );
    println!(
        "gantry:     {gcpu:7.2} CPU s  {gsamples:10.0} samples  {:6.2} us CPU/sample  RSS {:6.1} MiB (peak {:6.1} MiB)",
        per(gcpu, gsamples),
        g1.1 as f64 / 1024.0,
        g1.2 as f64 / 1024.0
    );
    println!(
        "gantry / prometheus: CPU per sample {:.2}x, peak RSS {:.2}x (goal: at or under 0.20x each)",
        per(gcpu, gsamples) / per(pcpu, psamples),
        g1.2 as f64 / p1.2 as f64
    );
    Ok(())
}
/// Release wasm + js, raw and brotli (quality 11, as a CDN would serve them).
fn bench_size() -> Result {
    bootstrap(true, false)?;
    leptos_build(true, true)?;
    let pkg = root().join("target").join("site").join("pkg");
    let files = ["gantry.wasm", "gantry.js"];
    let script = "const fs=require('fs'),z=require('zlib');let t=0,r=0;for(const f of process.argv.slice(1)){const b=fs.readFileSync(f);const c=z.brotliCompressSync(b,{params:{[z.constants.BROTLI_PARAM_QUALITY]:11}}).length;t+=c;r+=b.length;console.log(`${f.split('/').pop().padEnd(14)} ${String(b.length).padStart(9)} B raw ${String(c).padStart(8)} B brotli`)}console.log(`${'total'.padEnd(14)} ${String(r).padStart(9)} B raw ${String(t).padStart(8)} B brotli = ${(t/1000).toFixed(1)} KB (goal: under 400 KB)`)";
    step("browser bundle size (release)");
    run_cmd(
        Command::new("node")
            .arg("-e")
            .arg(script)
            .args(files.iter().map(|f| pkg.join(f))),
    )
}
