//! `cargo xtask bench ingest`: parse throughput, then Gantry beside Prometheus.

use std::env;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{exporters_and_scraper, metric_value, proc_usage};
use crate::bootstrap::ensure_apt;
use crate::util::{
    cargo, free_port, http_get, run_cmd, step, target_dir, wait_healthy, Guard, Result,
};

/// Parse throughput on real-format input at 512 nodes x 8 GPUs: the simulator's
/// dcgm-exporter text for every node, parsed by a release build of the parser, against a
/// bare line-splitting baseline in the same run.
pub(crate) fn bench_ingest() -> Result {
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

/// Prometheus 2.42 (Debian) and Gantry, side by side in one run: each scrapes the same 512
/// simulated nodes (8 GPUs each, every 10 s) for GANTRY_BENCH_SECONDS (default 300).
/// Gantry is a release build and is measured whole: scraping, parsing, aggregation,
/// rollups, SSE, and the simulated scheduler it also runs.
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
        "gantry / prometheus: CPU per sample {:.3}x, peak RSS {:.3}x (goal: at or under 0.20x each)",
        per(gcpu, gsamples) / per(pcpu, psamples),
        g1.2 as f64 / p1.2 as f64
    );
    Ok(())
}
