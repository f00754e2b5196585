//! Parse throughput of Gantry's exposition parser on a real-format scrape, against a
//! baseline measured in the same run: splitting the same text into lines and fields and
//! parsing each value as f64, the least any parser must do.
//!
//! Usage: gantry-bench FILE [SECONDS]

use std::hint::black_box;
use std::time::{Duration, Instant};

fn time<F: FnMut() -> usize>(min: Duration, mut f: F) -> (u32, Duration, usize) {
    let mut runs = 0u32;
    let mut out = 0;
    let start = Instant::now();
    while start.elapsed() < min || runs < 3 {
        out = black_box(f());
        runs += 1;
    }
    (runs, start.elapsed(), out)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: gantry-bench FILE [SECONDS]");
        std::process::exit(2);
    };
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gantry-bench: {path}: {e}");
            std::process::exit(1);
        }
    };
    let min = Duration::from_secs(secs);
    let (runs, took, samples) = time(min, || {
        let mut n = 0usize;
        let mut sum = 0.0;
        let report = exposition::parse(&text, |s| {
            n += 1;
            sum += s.value + s.labels.len() as f64;
        });
        assert_eq!(report.error_count, 0);
        black_box(sum);
        n
    });
    let (base_runs, base_took, base_samples) = time(min, || {
        let mut n = 0usize;
        let mut sum = 0.0;
        for line in text.split(|&b| b == b'\n') {
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let Some(sp) = line.iter().rposition(|&b| b == b' ') else { continue };
            if let Some(v) = std::str::from_utf8(&line[sp + 1..]).ok().and_then(|v| v.parse::<f64>().ok()) {
                sum += v;
                n += 1;
            }
        }
        black_box(sum);
        n
    });
    assert_eq!(samples, base_samples, "both must see every sample");
    let per = |d: Duration, r: u32| d.as_secs_f64() / f64::from(r);
    let (t, b) = (per(took, runs), per(base_took, base_runs));
    let mb = text.len() as f64 / 1e6;
    println!("input: {path}: {:.1} MB, {samples} samples", mb);
    println!(
        "gantry parser:        {:8.1} MB/s {:12.0} samples/s {:7.3} us/sample",
        mb / t,
        samples as f64 / t,
        t * 1e6 / samples as f64
    );
    println!(
        "baseline (split+f64): {:8.1} MB/s {:12.0} samples/s {:7.3} us/sample",
        mb / b,
        samples as f64 / b,
        b * 1e6 / samples as f64
    );
    println!("parser cost / baseline cost: {:.2}x", t / b);
}
