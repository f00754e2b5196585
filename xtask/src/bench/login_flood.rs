//! `cargo xtask bench login-flood`: a signed-in browser's requests while 1,000 wrong
//! passwords a second arrive from 200 client addresses on loopback.
//!
//! Two release Gantries started together on the same simulated cluster (SQLite, sign-in
//! required): one is flooded, its twin only browsed, so that what the flood costs in memory
//! is told from what the hot window gains over the same minutes. A browser's session asks
//! each for the overview page and the nodes API every 100 ms, first with no flood (the
//! baseline), then during it: the flooded one's p50/p99 latency in both phases, and both
//! processes' peak RSS (sampled every 100 ms). The attackers spread over 127.0.0.2 to
//! 127.0.0.201, half against a real user's name and half against made-up ones.

use std::env;
use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::proc_usage;
use crate::util::{cargo, free_port, run_cmd, step, target_dir, wait_healthy, Guard, Result};

const ATTACK_PER_SECOND: u64 = 1000;
const ATTACKERS: u32 = 200;
const THREADS: u64 = 8;

/// One request on a fresh connection; the status and the time to the whole response.
fn request(
    addr: SocketAddr,
    from: Option<IpAddr>,
    head: &str,
    body: &str,
) -> std::io::Result<(u16, Duration, String)> {
    let started = Instant::now();
    let mut s = match from {
        None => TcpStream::connect_timeout(&addr, Duration::from_secs(5))?,
        Some(ip) => {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            sock.bind(&SocketAddr::new(ip, 0).into())?;
            sock.connect_timeout(&addr.into(), Duration::from_secs(5))?;
            sock.into()
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{head}\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, started.elapsed(), text))
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// What the browser measured of one Gantry in one phase, and its peak RSS then (KiB).
#[derive(Default)]
struct Phase {
    latencies: Vec<Duration>,
    failures: u64,
    peak_rss_kib: u64,
}

/// A Gantry the browser uses: its address, process and session cookie.
struct Target {
    addr: SocketAddr,
    pid: u32,
    cookie: String,
}

/// The browser's requests to each target for `secs`, with their RSS sampled alongside.
fn browse(targets: &[Target], secs: u64) -> Vec<Phase> {
    let mut phases: Vec<Phase> = targets.iter().map(|_| Phase::default()).collect();
    let until = Instant::now() + Duration::from_secs(secs);
    let mut next = Instant::now();
    while Instant::now() < until {
        for (t, phase) in targets.iter().zip(phases.iter_mut()) {
            let cookie = &t.cookie;
            for head in [
                format!("GET / HTTP/1.1\r\nAccept: text/html\r\nCookie: {cookie}"),
                format!("GET /api/nodes HTTP/1.1\r\nCookie: {cookie}"),
            ] {
                match request(t.addr, None, &head, "") {
                    Ok((200, took, _)) => phase.latencies.push(took),
                    _ => phase.failures += 1,
                }
            }
            if let Some((_, rss, _)) = proc_usage(t.pid) {
                phase.peak_rss_kib = phase.peak_rss_kib.max(rss);
            }
        }
        next += Duration::from_millis(100);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    phases
}

/// Starts a Gantry on a fresh database `name.db` with one operator; signs the browser in.
fn start(exe: &std::path::Path, dir: &std::path::Path, name: &str) -> Result<(Guard, Target)> {
    let db = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let db = format!("sqlite://{}", db.display());
    let password = crate::util::random_password();
    run_cmd(
        Command::new(exe)
            .args(["user", "add", "operator1", "--role", "operator"])
            .env("GANTRY_DATABASE_URL", &db)
            .env("GANTRY_PASSWORD", &password)
            .stdout(Stdio::null()),
    )?;
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let child = Command::new(exe)
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", &db)
        .env("GANTRY_SIM_START_MS", "1795968000000")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start gantry: {e}"))?;
    let guard = Guard(Some(child), "gantry");
    let pid = guard.0.as_ref().map(|c| c.id()).unwrap_or(0);
    wait_healthy(addr, 180)?;
    let form = format!("name=operator1&password={password}&next=/");
    let (status, _, text) = request(
        addr,
        None,
        "POST /auth/login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded",
        &form,
    )
    .map_err(|e| format!("sign-in: {e}"))?;
    let cookie = text
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .filter(|_| status == 303)
        .ok_or_else(|| format!("the browser could not sign in ({status})"))?
        .to_string();
    Ok((guard, Target { addr, pid, cookie }))
}

pub(crate) fn bench_login_flood() -> Result {
    let secs: u64 = env::var("GANTRY_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    step("building gantry (release)");
    run_cmd(cargo().args(["build", "--release", "-p", "server", "--bin", "gantry"]))?;
    let exe = target_dir().join("release").join("gantry");
    let dir = target_dir().join("bench");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (flooded, a) = start(&exe, &dir, "login-flood")?;
    let (twin, b) = start(&exe, &dir, "login-flood-twin")?;
    let addr = a.addr;
    let pid = a.pid;
    let targets = [a, b];
    step("letting the first ticks settle (10 s)");
    std::thread::sleep(Duration::from_secs(10));
    let base_secs = (secs / 3).max(10);
    step(&format!("baseline: the browser alone for {base_secs} s"));
    let mut base = browse(&targets, base_secs);
    let (mut baseline, twin_base) = (std::mem::take(&mut base[0]), std::mem::take(&mut base[1]));

    step(&format!(
        "flood: {ATTACK_PER_SECOND} wrong passwords a second from {ATTACKERS} addresses for {secs} s, the browser alongside"
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let statuses = Arc::new(Mutex::new(std::collections::BTreeMap::<u16, u64>::new()));
    let sent = Arc::new(AtomicU64::new(0));
    let mut attackers = Vec::new();
    for t in 0..THREADS {
        let (stop, statuses, sent) = (Arc::clone(&stop), Arc::clone(&statuses), Arc::clone(&sent));
        attackers.push(std::thread::spawn(move || {
            let every = Duration::from_micros(1_000_000 * THREADS / ATTACK_PER_SECOND);
            let mut next = Instant::now();
            let mut i: u64 = t;
            while !stop.load(Relaxed) {
                let n = (i % u64::from(ATTACKERS)) as u32 + 2;
                let from = IpAddr::V4(Ipv4Addr::new(127, 0, (n >> 8) as u8, n as u8));
                let name = if i.is_multiple_of(2) {
                    "operator1".to_string()
                } else {
                    format!("guess{}", i % 5000)
                };
                let body = format!("name={name}&password=wrong-guess-{i}&next=/");
                let status = request(
                    addr,
                    Some(from),
                    "POST /auth/login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded",
                    &body,
                )
                .map(|r| r.0)
                .unwrap_or(0);
                sent.fetch_add(1, Relaxed);
                if let Ok(mut s) = statuses.lock() {
                    *s.entry(status).or_default() += 1;
                }
                i += THREADS;
                next += every;
                match next.checked_duration_since(Instant::now()) {
                    Some(wait) => std::thread::sleep(wait),
                    // Behind: do not burst to catch up by more than a second's worth.
                    None if Instant::now() - next > Duration::from_secs(1) => next = Instant::now(),
                    None => {}
                }
            }
        }));
    }
    let started = Instant::now();
    let mut during = browse(&targets, secs);
    let (mut flood, twin_flood) = (
        std::mem::take(&mut during[0]),
        std::mem::take(&mut during[1]),
    );
    let flood_secs = started.elapsed().as_secs_f64();
    stop.store(true, Relaxed);
    for a in attackers {
        let _ = a.join();
    }
    let rss_after = proc_usage(pid).map(|u| u.1).unwrap_or(0);
    drop(flooded);
    drop(twin);

    let sent = sent.load(Relaxed);
    let by_status = statuses.lock().map(|s| s.clone()).unwrap_or_default();
    println!(
        "attack: {sent} sign-ins in {flood_secs:.0} s ({:.0} a second); answers: {}",
        sent as f64 / flood_secs,
        by_status
            .iter()
            .map(|(s, n)| format!(
                "{} {n}",
                if *s == 0 {
                    "no answer".to_string()
                } else {
                    s.to_string()
                }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (b50, b99) = (
        percentile(&mut baseline.latencies, 0.5),
        percentile(&mut baseline.latencies, 0.99),
    );
    let (f50, f99) = (
        percentile(&mut flood.latencies, 0.5),
        percentile(&mut flood.latencies, 0.99),
    );
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "browser requests, baseline: {} (failed {}), p50 {:.1} ms, p99 {:.1} ms",
        baseline.latencies.len(),
        baseline.failures,
        ms(b50),
        ms(b99)
    );
    println!(
        "browser requests, flood:    {} (failed {}), p50 {:.1} ms, p99 {:.1} ms",
        flood.latencies.len(),
        flood.failures,
        ms(f50),
        ms(f99)
    );
    println!(
        "p99 during the flood: {:.2}x the baseline (goal: within 2x)",
        ms(f99) / ms(b99).max(0.001)
    );
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "peak RSS, flooded: {:.1} MiB before the flood, {:.1} MiB during it ({:.1} MiB after)",
        mib(baseline.peak_rss_kib),
        mib(flood.peak_rss_kib),
        mib(rss_after)
    );
    println!(
        "peak RSS, its idle twin: {:.1} MiB, then {:.1} MiB over the same minutes",
        mib(twin_base.peak_rss_kib),
        mib(twin_flood.peak_rss_kib)
    );
    println!(
        "RSS the flood cost: {:.1} MiB over the twin (goal: under 64 MiB)",
        (mib(flood.peak_rss_kib) - mib(twin_flood.peak_rss_kib)).max(0.0)
    );
    Ok(())
}
