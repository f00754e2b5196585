//! `cargo xtask bench fanout`: how many live browsers one server holds.
//!
//! A release gantry at 2,048 simulated nodes (16,384 GPUs) and a load generator of ours
//! (this binary, release, `bench fanout-load`, one small thread per client) on loopback:
//! 10,000 clients of the overview stream plus 1,000 more (the `/racks` page reads the same
//! stream, `/api/live`), of which 100 never read (slow readers). Both run with the
//! open-file limit raised to the hard limit (`ulimit -n` in the command). Printed: the delay from a tick's
//! publication (its SSE `id`, `seq-published_ms`) to its delivery at the clients, p50 and
//! p99; server CPU (cores) and RSS over the window; what became of the slow readers
//! (`gantry_sse_dropped_slow_total`). Goal: p99 under 1 s, under 1 core, RSS under 1 GiB,
//! a slow reader never delaying the others.

use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{metric_value, proc_usage};
use crate::util::{cargo, free_port, root, run_cmd, step, target_dir, wait_healthy, Guard, Result};

/// Raises the soft open-file limit to the hard one (this machine's container caps the hard
/// limit at 20,000, which holds 11,000 streams on each side).
const RAISE_NOFILE: &str = "ulimit -n \"$(ulimit -Hn)\"";

fn env_or(key: &str, default: u64) -> u64 {
    env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn bench_fanout() -> Result {
    let secs = env_or("GANTRY_BENCH_SECONDS", 60);
    let clients = env_or("GANTRY_FANOUT_CLIENTS", 11_000);
    let slow = env_or("GANTRY_FANOUT_SLOW", 100).min(clients);
    let (_server, pid, addr) = busy_gantry("fanout")?;
    step("letting the first ticks and the history settle (20 s)");
    std::thread::sleep(Duration::from_secs(20));

    step(&format!(
        "{clients} live clients ({slow} never read), measured for {secs} s"
    ));
    let (_load, out) = load_generator(&[
        "bench",
        "fanout-load",
        &addr.to_string(),
        &clients.to_string(),
        &slow.to_string(),
        &secs.to_string(),
    ])?;
    let mut u0 = None;
    let mut result = None;
    let mut rss_max = 0;
    for line in BufReader::new(out).lines() {
        let line = line.map_err(|e| e.to_string())?;
        println!("  load: {line}");
        if line.starts_with("measuring") {
            u0 = proc_usage(pid).map(|u| (u, Instant::now()));
        } else if line.starts_with("result") {
            result = Some(line);
            break;
        } else if let Some((_, rss, _)) = proc_usage(pid) {
            rss_max = rss_max.max(rss);
        }
    }
    let u1 = proc_usage(pid).ok_or("cannot read gantry's /proc")?;
    let ((cpu0, _, _), t0) = u0.ok_or("the load generator never started measuring")?;
    let cores = (u1.0 - cpu0) / t0.elapsed().as_secs_f64();
    let result = result.ok_or("the load generator gave no result")?;
    let field = |name: &str| {
        result
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or("?")
            .to_string()
    };
    let dropped = metric_value(addr, "/metrics", "gantry_sse_dropped_slow_total").unwrap_or(0.0);
    let resyncs = metric_value(addr, "/metrics", "gantry_sse_resyncs_total").unwrap_or(0.0);
    let refused = metric_value(addr, "/metrics", "gantry_connections_refused_total").unwrap_or(0.0)
        + metric_value(addr, "/metrics", "gantry_sse_refused_total").unwrap_or(0.0);
    let streams = metric_value(addr, "/metrics", "gantry_sse_clients").unwrap_or(0.0);
    println!(
        "\nfan-out at 2,048 nodes, {clients} live clients ({slow} of them never reading), {secs} s:"
    );
    println!(
        "  delay publication -> delivery: p50 {} ms, p99 {} ms, max {} ms over {} deliveries (goal: p99 under 1000 ms)",
        field("p50"),
        field("p99"),
        field("max"),
        field("n")
    );
    println!(
        "  reading clients that got every tick: {} of {}; ticks per reading client: {} at most, {} at least; resyncs (a snapshot for a client that fell behind): {resyncs}",
        field("complete"),
        clients - slow,
        field("ticks"),
        field("fewest")
    );
    println!(
        "  server CPU {cores:.2} cores (goal: under 1), RSS {} MiB now, {} MiB peak (goal: under 1024)",
        u1.1 / 1024,
        u1.2.max(rss_max) / 1024
    );
    println!(
        "  reconnects (as EventSource does, 1 s after a stream failed): {}",
        field("reconnects")
    );
    println!(
        "  slow readers: {dropped} dropped by the server's write deadline; streams open at the end: {streams}; connections or streams refused: {refused}"
    );
    Ok(())
}

/// Builds gantry and the load generator (release) and starts gantry at 2,048 simulated
/// nodes (readings taken directly, a fresh SQLite file under `target/NAME/`, limits raised
/// for many streams, open files to the hard limit), healthy: its guard, pid and address.
/// Shared by `bench fanout` and `soak`.
pub(crate) fn busy_gantry(name: &str) -> Result<(Guard, u32, SocketAddr)> {
    crate::site::build(true, false)?;
    step("building the load generator (release)");
    run_cmd(cargo().args(["build", "--release", "-p", "xtask"]))?;
    let dir = target_dir().join(name);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let db = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm", ".serving"] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let config = dir.join(format!("{name}.toml"));
    fs::write(
        &config,
        "[limits]\nmax_connections = 30000\nlive_streams = 30000\nlive_streams_per_user = 30000\n",
    )
    .map_err(|e| e.to_string())?;
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    step(&format!(
        "starting gantry (release) with 2,048 simulated nodes on {addr}, open files as the hard limit"
    ));
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("{RAISE_NOFILE} && exec \"$0\""))
        .arg(target_dir().join("release").join("gantry"))
        .current_dir(root())
        .env("GANTRY_CONFIG", &config)
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("GANTRY_SIM_NODES", "2048")
        .env("GANTRY_TELEMETRY", "direct")
        .env("GANTRY_ANONYMOUS_READ", "true")
        .env("RUST_LOG", "warn")
        .spawn()
        .map_err(|e| format!("cannot start gantry: {e}"))?;
    let pid = child.id();
    let guard = Guard(Some(child), "gantry");
    wait_healthy(addr, 120)?;
    Ok((guard, pid, addr))
}

/// The release xtask with `args`, open files to the hard limit: its guard and its output.
pub(crate) fn load_generator(args: &[&str]) -> Result<(Guard, std::process::ChildStdout)> {
    let load = Command::new("sh")
        .arg("-c")
        .arg(format!("{RAISE_NOFILE} && exec \"$0\" \"$@\""))
        .arg(target_dir().join("release").join("xtask"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the load generator: {e}"))?;
    let mut load = Guard(Some(load), "load generator");
    let out = load
        .0
        .as_mut()
        .and_then(|c| c.stdout.take())
        .ok_or("no output from the load generator")?;
    Ok((load, out))
}

/// `bench fanout-load ADDR N SLOW SECS`: the load generator (run by `bench fanout`).
pub(crate) fn fanout_load(args: &[String]) -> Result {
    let usage = "usage: xtask bench fanout-load ADDR CLIENTS SLOW SECONDS";
    let addr: SocketAddr = args.first().and_then(|a| a.parse().ok()).ok_or(usage)?;
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let slow: usize = args.get(2).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let secs: u64 = args.get(3).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let measuring = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicUsize::new(0));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let delays: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(Vec::new()));
    let per_client: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    for i in 0..n {
        let (measuring, connected, reconnects, delays, per_client) = (
            Arc::clone(&measuring),
            Arc::clone(&connected),
            Arc::clone(&reconnects),
            Arc::clone(&delays),
            Arc::clone(&per_client),
        );
        let spawned = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                client(
                    addr,
                    i < slow,
                    &measuring,
                    &connected,
                    &reconnects,
                    &delays,
                    &per_client,
                )
            });
        if let Err(e) = spawned {
            return Err(format!("thread {i}: {e}"));
        }
        if i % 250 == 249 {
            // Connect in waves, as browsers arrive: 1,000 a second.
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while connected.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "connected {} of {n} ({} reconnects so far)",
        connected.load(Ordering::Relaxed),
        reconnects.load(Ordering::Relaxed)
    );
    std::thread::sleep(Duration::from_secs(5));
    println!("measuring");
    let _ = std::io::stdout().flush();
    measuring.store(true, Ordering::Release);
    for s in 0..secs {
        std::thread::sleep(Duration::from_secs(1));
        if s % 10 == 9 {
            println!("{} s", s + 1);
            let _ = std::io::stdout().flush();
        }
    }
    measuring.store(false, Ordering::Release);
    std::thread::sleep(Duration::from_millis(2500));
    let mut d = delays.lock().map_err(|_| "poisoned")?.clone();
    d.sort_unstable();
    let pct = |p: f64| {
        d.get(((d.len() as f64 * p) as usize).min(d.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let counts = per_client.lock().map_err(|_| "poisoned")?.clone();
    let best = counts.iter().copied().max().unwrap_or(0);
    let fewest = counts.iter().copied().min().unwrap_or(0);
    let complete = counts
        .iter()
        .filter(|&&c| c + 1 >= best && best > 0)
        .count();
    println!(
        "result n={} p50={} p99={} max={} ticks={best} fewest={fewest} complete={complete} reconnects={}",
        d.len(),
        pct(0.50),
        pct(0.99),
        d.last().copied().unwrap_or(0),
        reconnects.load(Ordering::Relaxed)
    );
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

/// One client: the stream read as a browser's `EventSource` reads it (reconnecting a
/// second after a stream that failed or was refused), or, if `slow`, never read; the delay
/// of every tick it gets while measuring recorded.
pub(crate) fn client(
    addr: SocketAddr,
    slow: bool,
    measuring: &AtomicBool,
    connected: &AtomicUsize,
    reconnects: &AtomicUsize,
    delays: &Mutex<Vec<u32>>,
    per_client: &Mutex<Vec<usize>>,
) {
    let mut mine: Vec<u32> = Vec::new();
    let mut first = true;
    let mut was_measuring = false;
    for _attempt in 0..30 {
        if !first {
            reconnects.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs(1));
        }
        let ended = stream(
            addr,
            slow,
            measuring,
            connected,
            &mut first,
            &mut was_measuring,
            &mut mine,
        );
        if ended {
            break;
        }
    }
    if let Ok(mut p) = per_client.lock() {
        p.push(mine.len());
    }
    if let Ok(mut d) = delays.lock() {
        d.extend(mine);
    }
}

/// One connection of a client; `true` once the measurement has ended.
fn stream(
    addr: SocketAddr,
    slow: bool,
    measuring: &AtomicBool,
    connected: &AtomicUsize,
    first: &mut bool,
    was_measuring: &mut bool,
    mine: &mut Vec<u32>,
) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    if write!(
        s,
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    if std::mem::take(first) {
        connected.fetch_add(1, Ordering::Relaxed);
    }
    if slow {
        // Holds its connection and reads nothing.
        std::thread::sleep(Duration::from_secs(3600));
        return true;
    }
    let mut buf = vec![0u8; 256 * 1024];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let got = match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        let at = now_ms();
        let on = measuring.load(Ordering::Acquire);
        if *was_measuring && !on {
            return true;
        }
        *was_measuring = on;
        // Only `id:` lines matter; a line split across reads is carried over.
        for (i, part) in buf[..got].split(|&b| b == b'\n').enumerate() {
            let whole: &[u8] = if i == 0 && !line.is_empty() {
                line.extend_from_slice(part);
                &line
            } else {
                part
            };
            if let Some(id) = whole.strip_prefix(b"id: ") {
                let published = std::str::from_utf8(id)
                    .ok()
                    .and_then(|t| t.trim().split_once('-'))
                    .and_then(|(_, p)| p.parse::<u64>().ok());
                if let (true, Some(p)) = (on, published) {
                    mine.push(at.saturating_sub(p) as u32);
                }
            }
        }
        // Keep the last, unfinished line if it may be an `id:` line.
        line.clear();
        if let Some(last) = buf[..got].rsplit(|&b| b == b'\n').next() {
            if buf[got - 1] != b'\n' && last.len() < 64 {
                line.extend_from_slice(last);
            }
        }
    }
}
