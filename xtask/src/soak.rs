//! `cargo xtask soak [--minutes N]`: does a busy Gantry stay the same size and keep
//! answering over time?
//!
//! A release gantry at 2,048 simulated nodes (readings taken directly, so the load is the
//! browsers') and a load generator of ours (`soak-load`, release): 1,000 live clients of
//! `/api/live`, read as `EventSource` reads them, plus 200 requests a second of page and
//! API traffic (one in ten a server-rendered page, the rest JSON and health), for N minutes
//! (30 unless told; CI runs 1). Printed: gantry's RSS at the start and end of the window
//! and its slope (least squares over a sample every 10 s), errors (failed requests, non-2xx
//! answers, live streams that broke), and p50 / p99 latency per route class. Goal for 30
//! minutes: RSS growth under 10 %, zero errors. A soak of 10 minutes or more runs the load
//! for 5 more minutes first and opens its window after them (the simulator's truth ring
//! filling, the load's working set reaching its size); every sample goes to
//! `target/bench/soak-rss.csv`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bench::fanout::{busy_gantry, load_generator};
use crate::bench::{metric_value, proc_usage};
use crate::util::{step, Result};
const CLIENTS: usize = 1000;
const RATE: u64 = 200;
const WORKERS: u64 = 8;

/// What the request workers ask for, by class: pages as a browser asks for them, JSON, health.
const ROUTES: [(&str, &str); 10] = [
    ("page", "/racks"),
    ("api", "/api/nodes"),
    ("api", "/api/jobs"),
    ("api", "/api/alerts"),
    ("health", "/healthz"),
    ("api", "/api/targets"),
    ("api", "/api/nodes"),
    ("api", "/api/jobs"),
    ("health", "/metrics"),
    ("api", "/api/alerts"),
];
/// Pages taken in turn by the `page` slot.
const PAGES: [&str; 6] = ["/racks", "/", "/thermal", "/topology", "/nodes", "/jobs"];

pub(crate) fn soak(args: &[String]) -> Result {
    let minutes: u64 = match args {
        [] => 30,
        [flag, n] if flag == "--minutes" => n
            .parse()
            .map_err(|_| format!("--minutes takes a whole number, not {n:?}"))?,
        _ => return Err("usage: cargo xtask soak [--minutes N]".into()),
    };
    if minutes == 0 {
        return Err("--minutes must be at least 1".into());
    }
    let (_server, pid, addr) = busy_gantry("soak")?;
    // Warm-up, under the load: the simulator keeps its last 300 ticks of truth
    // (`/sim/truth?seq=`), which grows RSS by about 13 MiB a minute at 2,048 nodes until
    // full (5 min at 1 s), and the load's own working set (1,000 streams' buffers, the
    // allocator's pools for 8 request threads) takes its first minutes to reach its size. A
    // long soak opens its window after both, so its slope is Gantry's over time; a short
    // one (CI) only checks for errors.
    let warmup: u64 = if minutes >= 10 { 300 } else { 0 };
    std::thread::sleep(Duration::from_secs(20));
    step(&format!(
        "{CLIENTS} live clients and {RATE} requests a second for {minutes} min after a {warmup} s warm-up under the same load"
    ));
    let secs = (minutes * 60 + warmup).to_string();
    let (_load, out) = load_generator(&["soak-load", &addr.to_string(), &secs])?;
    // (seconds since the load began measuring, RSS KiB)
    let mut all: Vec<(f64, u64)> = Vec::new();
    let mut t0 = None;
    let mut result = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.starts_with("measuring") {
            t0 = Some(Instant::now());
        }
        if let (Some(t), Some((_, rss, _))) = (t0, proc_usage(pid)) {
            all.push((t.elapsed().as_secs_f64(), rss));
        }
        if line.starts_with("class ") || line.starts_with("live ") || line.starts_with("total ") {
            result.push(line.clone());
        }
        println!("  load: {line}");
    }
    let csv = crate::util::target_dir().join("bench").join("soak-rss.csv");
    let _ = std::fs::create_dir_all(csv.parent().unwrap_or(std::path::Path::new(".")));
    let _ = std::fs::write(
        &csv,
        all.iter()
            .map(|(t, kib)| format!("{t:.0},{kib}\n"))
            .collect::<String>(),
    );
    let samples: Vec<(f64, u64)> = all
        .iter()
        .copied()
        .filter(|(t, _)| *t >= warmup as f64)
        .collect();
    if samples.len() < 2 {
        return Err("the load generator gave too few samples".into());
    }
    let (start, end) = (samples[0].1, samples[samples.len() - 1].1);
    let slope = slope_kib_per_s(&samples);
    let growth = (end as f64 - start as f64) / start as f64 * 100.0;
    let dropped = metric_value(addr, "/metrics", "gantry_sse_dropped_slow_total").unwrap_or(0.0);
    let refused = metric_value(addr, "/metrics", "gantry_connections_refused_total").unwrap_or(0.0)
        + metric_value(addr, "/metrics", "gantry_sse_refused_total").unwrap_or(0.0);
    let queue_dropped =
        metric_value(addr, "/metrics", "gantry_store_queue_dropped_total").unwrap_or(0.0);
    println!("\nsoak at 2,048 nodes, {CLIENTS} live clients, {RATE} requests/s, {minutes} min:");
    println!(
        "  RSS {} MiB when the load began, {} MiB when the window opened ({warmup} s later), {} MiB at the end: {growth:+.1} % over the window (goal: under +10 %); slope {:+.1} MiB/hour over {} samples ({})",
        all[0].1 / 1024,
        start / 1024,
        end / 1024,
        slope * 3600.0 / 1024.0,
        samples.len(),
        csv.display()
    );
    for l in &result {
        println!("  {l}");
    }
    println!(
        "  server side: {dropped} live clients dropped as slow, {refused} connections or streams refused, {queue_dropped} history writes dropped"
    );
    // Errors fail the run at any length; RSS growth is a figure (a short run is mostly
    // warm-up), read against its goal over 30 minutes.
    let errors: u64 = result
        .iter()
        .find_map(|l| l.strip_prefix("total errors: "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .ok_or("the load generator gave no error count")?;
    if errors > 0 || refused > 0.0 {
        return Err(format!(
            "the soak saw {errors} errors and {refused} refusals (goal: none)"
        ));
    }
    Ok(())
}

/// Least-squares slope of (seconds, KiB).
fn slope_kib_per_s(s: &[(f64, u64)]) -> f64 {
    let n = s.len() as f64;
    let mx = s.iter().map(|p| p.0).sum::<f64>() / n;
    let my = s.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let num: f64 = s.iter().map(|p| (p.0 - mx) * (p.1 as f64 - my)).sum();
    let den: f64 = s.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// One request per `Connection: close`: status and whole body read; (status, ms).
fn request(addr: SocketAddr, path: &str, html: bool) -> std::io::Result<(u16, u32)> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let accept = if html {
        "text/html"
    } else {
        "application/json"
    };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    let status = std::str::from_utf8(body.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, t.elapsed().as_millis() as u32))
}

/// One request's class, latency in ms and whether it succeeded.
type Done = (&'static str, u32, bool);

/// `soak-load ADDR SECONDS`: the load generator `soak` runs.
pub(crate) fn soak_load(args: &[String]) -> Result {
    let usage = "usage: xtask soak-load ADDR SECONDS";
    let addr: SocketAddr = args.first().and_then(|a| a.parse().ok()).ok_or(usage)?;
    let secs: u64 = args.get(1).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let measuring = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicUsize::new(0));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let delays: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(Vec::new()));
    let per_client: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    for i in 0..CLIENTS {
        let (m, c, r, d, p) = (
            Arc::clone(&measuring),
            Arc::clone(&connected),
            Arc::clone(&reconnects),
            Arc::clone(&delays),
            Arc::clone(&per_client),
        );
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || crate::bench::fanout::client(addr, false, &m, &c, &r, &d, &p))
            .map_err(|e| format!("thread {i}: {e}"))?;
        if i % 250 == 249 {
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while connected.load(Ordering::Relaxed) < CLIENTS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "connected {} of {CLIENTS}",
        connected.load(Ordering::Relaxed)
    );
    println!("measuring");
    let _ = std::io::stdout().flush();
    measuring.store(true, Ordering::Release);
    let reconnects_before = reconnects.load(Ordering::Relaxed);
    // (class, ms, ok) per request.
    let done: Arc<Mutex<Vec<Done>>> = Arc::new(Mutex::new(Vec::new()));
    let errors_seen: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (done, errors_seen) = (Arc::clone(&done), Arc::clone(&errors_seen));
        workers.push(std::thread::spawn(move || {
            let every = Duration::from_micros(1_000_000 * WORKERS / RATE);
            let mut next = Instant::now() + every * w as u32 / WORKERS as u32;
            let mut k = w as usize;
            let mut page = w as usize;
            while next < end {
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                next += every;
                let (class, mut path) = ROUTES[k % ROUTES.len()];
                k += 1;
                if class == "page" {
                    path = PAGES[page % PAGES.len()];
                    page += 1;
                }
                let got = request(addr, path, class == "page");
                let (ms, ok, why) = match got {
                    Ok((st, ms)) => (ms, (200..300).contains(&st), format!("{path}: {st}")),
                    Err(e) => (0, false, format!("{path}: {e}")),
                };
                if !ok {
                    if let Ok(mut v) = errors_seen.lock() {
                        if v.len() < 20 {
                            v.push(why);
                        }
                    }
                }
                if let Ok(mut d) = done.lock() {
                    d.push((class, ms, ok));
                }
            }
        }));
    }
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(10));
        let n = done.lock().map(|d| d.len()).unwrap_or(0);
        println!(
            "{} s: {n} requests, {} live reconnects",
            start.elapsed().as_secs(),
            reconnects.load(Ordering::Relaxed) - reconnects_before
        );
        let _ = std::io::stdout().flush();
    }
    for w in workers {
        let _ = w.join();
    }
    let broken = reconnects.load(Ordering::Relaxed) - reconnects_before;
    measuring.store(false, Ordering::Release);
    std::thread::sleep(Duration::from_millis(2500));
    let done = done.lock().map_err(|_| "poisoned")?.clone();
    let mut errors = 0;
    for class in ["page", "api", "health"] {
        let mut ms: Vec<u32> = done
            .iter()
            .filter(|d| d.0 == class && d.2)
            .map(|d| d.1)
            .collect();
        ms.sort_unstable();
        let failed = done.iter().filter(|d| d.0 == class && !d.2).count();
        errors += failed;
        let pct = |p: f64| {
            ms.get(((ms.len() as f64 * p) as usize).min(ms.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "class {class}: {} requests, p50 {} ms, p99 {} ms, max {} ms, {failed} failed",
            ms.len() + failed,
            pct(0.5),
            pct(0.99),
            ms.last().copied().unwrap_or(0)
        );
    }
    let mut d = delays.lock().map_err(|_| "poisoned")?.clone();
    d.sort_unstable();
    let p99 = d
        .get(((d.len() as f64 * 0.99) as usize).min(d.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0);
    println!(
        "live streams: {} deliveries, p99 delay {p99} ms, {broken} broke and reconnected",
        d.len()
    );
    println!(
        "total errors: {} ({} requests at {:.0} a second; goal: 0 errors)",
        errors + broken,
        done.len(),
        done.len() as f64 / secs as f64
    );
    for e in errors_seen.lock().map_err(|_| "poisoned")?.iter() {
        println!("error seen: {e}");
    }
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}
