//! `gantry`: the server binary and its operator commands.

use std::path::PathBuf;
use std::process::ExitCode;

use server::config::Config;

const USAGE: &str = "\
usage: gantry [serve] [--config FILE]
       gantry inspect metrics FILE|URL|-
       gantry inspect topology FILE
       gantry inspect slurm-nodes FILE|-
       gantry inspect slurm-jobs FILE|-
       gantry inspect checkpoints DIR
       gantry user add NAME --role viewer|operator|manager|admin [--config FILE]

serve    Runs Gantry. Configuration: defaults, then FILE (or $GANTRY_CONFIG), then GANTRY_*
         variables.
inspect metrics
         Prints, as JSON, what Gantry understands from one dcgm-exporter scrape: saved in
         FILE, fetched from an http:// or https:// URL (verified with the system's CAs), or
         read from standard input. Per GPU: readings
         with units, decoded throttle reasons, fields sent as DCGM no-data sentinels; and
         the metrics it ignored and the lines it could not read.
inspect topology
         Prints a Slurm topology.conf (tree or block) as JSON, hostlists expanded.
inspect slurm-nodes, inspect slurm-jobs
         Prints Slurm's node or job JSON (sinfo/squeue/scontrol --json or slurmrestd, API
         v0.0.37 to v0.0.44) as Gantry normalizes it: states, hostlists expanded, GPUs.
inspect checkpoints
         Prints, as JSON, the checkpoints found under DIR (torch.distributed.checkpoint,
         torchtitan, Megatron-LM, DeepSpeed, Hugging Face Trainer, NeMo): framework, step,
         size, files, save times, complete or why not, the job id in the path; and what
         could not be read. Symlinks are not followed.
user add Creates a user in the configured database, or sets a new password and role for an
         existing one. The password is read from $GANTRY_PASSWORD, or else as one line of
         standard input (at least 10 characters); it is stored only as an argon2id hash.
";

/// The largest scrape `inspect` reads; a larger one is refused rather than read whole.
const MAX_SCRAPE_BYTES: u64 = 64 << 20;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("inspect")
        && all.get(1).map(String::as_str) == Some("checkpoints")
    {
        let Some(dir) = all.get(2).filter(|_| all.len() == 3) else {
            return usage_error("inspect checkpoints takes one DIR");
        };
        if !std::path::Path::new(dir).is_dir() {
            return fail(dir, &"not a directory");
        }
        let (found, issues) = server::checkpoints::Scanner::default().scan(
            &[PathBuf::from(dir)],
            server::checkpoints::Limits::default(),
        );
        return print_json(&serde_json::json!({ "checkpoints": found, "problems": issues }));
    }
    if all.first().map(String::as_str) == Some("inspect") {
        return inspect(&all[1..]);
    }
    if all.first().map(String::as_str) == Some("user") {
        return user(&all[1..]);
    }
    let mut args = all.into_iter();
    let mut config: Option<PathBuf> = std::env::var_os("GANTRY_CONFIG").map(PathBuf::from);
    while let Some(a) = args.next() {
        match a.as_str() {
            "serve" => {}
            "--config" => match args.next() {
                Some(p) => config = Some(p.into()),
                None => return usage_error("--config needs a file"),
            },
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage_error(&format!("unknown argument {other:?}")),
        }
    }
    let cfg = match Config::load(config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gantry: configuration refused: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gantry: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry: {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("gantry: cannot start the runtime: {e}");
            None
        }
    }
}

/// `gantry user add NAME --role ROLE [--config FILE]`.
fn user(args: &[String]) -> ExitCode {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("add") {
        return usage_error("user takes: add NAME --role ROLE");
    }
    let Some(name) = it.next() else {
        return usage_error("user add needs a NAME");
    };
    let mut role = None;
    let mut config: Option<PathBuf> = std::env::var_os("GANTRY_CONFIG").map(PathBuf::from);
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--role", Some(r)) => match app::actions::Role::parse(r) {
                Some(r) => role = Some(r),
                None => return usage_error("--role is one of: viewer, operator, manager, admin"),
            },
            ("--config", Some(p)) => config = Some(p.into()),
            _ => return usage_error(&format!("unknown or incomplete argument {a:?}")),
        }
    }
    let Some(role) = role else {
        return usage_error("user add needs --role");
    };
    let password = match std::env::var("GANTRY_PASSWORD") {
        Ok(p) => p,
        Err(_) => {
            let mut line = String::new();
            if let Err(e) = std::io::stdin().read_line(&mut line) {
                return fail("standard input", &e.to_string());
            }
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    let cfg = match Config::load(config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gantry: configuration refused: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let done = rt.block_on(async {
        let store = server::store::Store::connect(cfg.database_url.expose())
            .await
            .map_err(|e| e.to_string())?;
        server::auth::add_user(&store, name, &password, role)
            .await
            .map_err(|e| e.to_string())
    });
    match done {
        Ok(()) => {
            println!("user {name} ({}) saved", role.as_str());
            ExitCode::SUCCESS
        }
        Err(e) => fail("user add", &e),
    }
}

fn inspect(args: &[String]) -> ExitCode {
    let (Some(kind), Some(src), 2) = (args.first().map(String::as_str), args.get(1), args.len())
    else {
        return usage_error("inspect takes: metrics FILE|URL|-, topology FILE, slurm-nodes FILE|-, slurm-jobs FILE|-");
    };
    if !["metrics", "topology", "slurm-nodes", "slurm-jobs"].contains(&kind) {
        return usage_error(&format!("no inspect command {kind:?}"));
    }
    let body = match read_bounded(src) {
        Ok(b) => b,
        Err(e) => return fail(src, &e),
    };
    match kind {
        "metrics" => {
            // Without a Hostname label the GPUs belong to where they came from.
            let host = match src.as_str() {
                "-" => "stdin",
                url if url.starts_with("http://") => {
                    url.trim_start_matches("http://").split(['/', ':']).next().unwrap_or(url)
                }
                path => path,
            };
            let scrape = server::telemetry::dcgm::decode_checked(&body, host);
            let gpus: Vec<serde_json::Value> = scrape
                .gpus
                .iter()
                .map(|g| {
                    let mut v = serde_json::to_value(g).unwrap_or_default();
                    if let (Some(obj), Some(t)) = (v.as_object_mut(), g.throttle()) {
                        obj.insert("throttle_reasons".into(), t.names().into());
                        obj.insert("throttling".into(), t.is_throttling().into());
                    }
                    v
                })
                .collect();
            print_json(&serde_json::json!({
                "units": {
                    "power_watts": "W", "power_limit_watts": "W", "gpu_temp_celsius": "°C",
                    "memory_temp_celsius": "°C", "sm_clock_mhz": "MHz", "*_ratio": "0..1",
                    "gpu_util_percent": "%", "*_bytes_per_second": "B/s",
                    "total_energy_millijoules": "mJ"
                },
                "gpus": gpus,
                "samples": scrape.samples,
                "ignored_metrics": scrape.ignored_metrics,
                "line_errors": scrape.line_errors,
                "errors": scrape.errors,
            }))
        }
        "topology" => match String::from_utf8(body) {
            Err(_) => fail(src, &"not UTF-8 text"),
            Ok(text) => match server::slurm::topology::parse(&text) {
                Ok(t) => print_json(&t),
                Err(e) => fail(src, &e),
            },
        },
        "slurm-nodes" => match server::slurm::json::parse_nodes(&body) {
            Ok(n) => print_json(&serde_json::json!({ "nodes": n })),
            Err(e) => fail(src, &e),
        },
        "slurm-jobs" => match server::slurm::json::parse_jobs(&body) {
            Ok(j) => print_json(&serde_json::json!({ "jobs": j })),
            Err(e) => fail(src, &e),
        },
        _ => usage_error("inspect takes: metrics FILE|URL|-, topology FILE, slurm-nodes FILE|-, slurm-jobs FILE|-"),
    }
}

/// Prints `v` as pretty JSON; a failure to print is an error exit.
fn print_json(v: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("output", &e),
    }
}

/// Reports an error about `what` on stderr and exits with failure.
fn fail(what: &str, e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("gantry: {what}: {e}");
    ExitCode::FAILURE
}

fn read_bounded(src: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if src.starts_with("http://") || src.starts_with("https://") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let tls = server::tls::client_config(None).map_err(std::io::Error::other)?;
        let client = server::scrape::Client::new(
            server::scrape::ScrapeConfig {
                timeout: std::time::Duration::from_secs(10),
                max_body_bytes: MAX_SCRAPE_BYTES as usize,
                gzip: true,
                max_idle_per_host: 1,
            },
            tls,
        );
        return rt
            .block_on(client.fetch(src))
            .map_err(std::io::Error::other);
    }
    let reader: Box<dyn Read> = if src == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(src)?)
    };
    let mut body = Vec::new();
    reader.take(MAX_SCRAPE_BYTES + 1).read_to_end(&mut body)?;
    if body.len() as u64 > MAX_SCRAPE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_SCRAPE_BYTES >> 20
        )));
    }
    Ok(body)
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("gantry: {msg}\n{USAGE}");
    ExitCode::from(2)
}

async fn serve(cfg: Config) -> Result<(), server::serve::ServeError> {
    tracing::info!(config = ?cfg, "starting");
    let running = server::serve::start(cfg).await?;
    println!("Gantry is serving http://{}/", running.addr);
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.stop().await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
