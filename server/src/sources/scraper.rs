//! The scrape task for configured exporters of real nodes: it scrapes what is due every
//! round and hands the answers to the shared [`crate::telemetry::ingest::Ingest`], holding it only to plan and to
//! take answers, never while exporters are awaited; a source's tick reads what is fresh.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{next_tick, wall_now_ms};
use crate::live::Live;
use crate::telemetry::ingest::SharedIngest;

/// Scrapes what is due every `round` until `shutdown`, holding the `Ingest` only to plan
/// and to take the answers, never while exporters are awaited.
pub async fn run_scraper(
    ingest: SharedIngest,
    live: Arc<Live>,
    interval: Duration,
    round: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(round);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while next_tick(&mut ticker, &mut shutdown).await {
        let now = wall_now_ms();
        let planned = match ingest.lock() {
            Ok(mut i) => i.plan(now, interval),
            Err(_) => break,
        };
        if planned.is_empty() {
            continue;
        }
        let results = planned.fetch().await;
        let health = match ingest.lock() {
            Ok(mut i) => {
                let stats = i.apply(results, now);
                live.metrics.record_scrape_round(&stats);
                i.health()
            }
            Err(_) => break,
        };
        live.set_targets(health);
    }
    tracing::info!("scraper stopped");
}

/// Starts the scrape task of configured exporters (into `ctx.tasks`) and returns the
/// `Ingest` it shares with the live tick. It looks for due targets every tenth of the
/// interval (at most a second): targets keep their own phase in the interval, so each is
/// scraped close to its time.
pub fn spawn(
    ing: crate::telemetry::ingest::Ingest,
    ctx: &mut super::Context<'_>,
    interval_ms: u64,
) -> SharedIngest {
    let shared = Arc::new(std::sync::Mutex::new(ing));
    ctx.tasks.push(tokio::spawn(run_scraper(
        Arc::clone(&shared),
        Arc::clone(ctx.live),
        Duration::from_millis(interval_ms),
        Duration::from_millis((interval_ms / 10).clamp(100, 1000)),
        ctx.stop.clone(),
    )));
    shared
}
