//! The scan task: scans on a timer and writes what it finds to the store.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{Limits, Scanner};

/// Scans `roots` every `interval` and records what it finds for known jobs in the store;
/// only new or changed checkpoints are written. Problems are logged per pass, bounded.
pub async fn run_scanner(
    roots: Vec<PathBuf>,
    interval: std::time::Duration,
    store: crate::store::Store,
    live: std::sync::Arc<crate::live::Live>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let scanner = std::sync::Arc::new(std::sync::Mutex::new(Scanner::default()));
    let mut written: HashMap<String, (bool, u64, i64)> = HashMap::new();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
        let (sc, r) = (std::sync::Arc::clone(&scanner), roots.clone());
        let scanned = tokio::task::spawn_blocking(move || {
            sc.lock().map(|mut s| s.scan(&r, Limits::default())).ok()
        })
        .await;
        let Ok(Some((found, issues))) = scanned else {
            tracing::error!("checkpoint scan failed");
            continue;
        };
        for i in issues.iter().take(3) {
            tracing::warn!(path = %i.path, problem = %i.problem, "checkpoint scan");
        }
        for f in found {
            let (Some(job_id), Some(start), Some(end)) = (f.job_id, f.started_ms, f.finished_ms)
            else {
                continue;
            };
            let key = (f.complete, f.size_bytes, end);
            if written.get(&f.path) == Some(&key) {
                continue;
            }
            let c = app::model::Checkpoint {
                job_id,
                step: f.step,
                path: f.path.clone(),
                size_bytes: f.size_bytes,
                started_ms: start,
                duration_ms: (end - start).max(0),
                complete: f.complete,
            };
            match store.put_checkpoint(&c).await {
                Ok(()) => {
                    // Rules read the newest complete checkpoint from memory; the pipeline
                    // books the save in the job's ledger.
                    live.checkpoint_recorded(c);
                    written.insert(f.path, key);
                }
                Err(e) => tracing::error!(error = %e, "checkpoint write failed"),
            }
        }
    }
}
