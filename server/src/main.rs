//! `gantry`: the server binary and its operator commands.

use std::path::PathBuf;
use std::process::ExitCode;

use server::config::Config;

const USAGE: &str = "\
usage: gantry [serve] [--config FILE]

Runs Gantry. Configuration: defaults, then FILE (or $GANTRY_CONFIG), then GANTRY_* variables.
";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .init();
    let mut args = std::env::args().skip(1);
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
