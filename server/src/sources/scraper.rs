//! The scrape task for configured exporters of real nodes: it scrapes what is due every
//! round and hands the answers to the shared [`crate::telemetry::ingest::Ingest`], holding it only to plan and to
//! take answers, never while exporters are awaited; a source's tick reads what is fresh.
//! The PromQL task likewise: a store's answers never hold up a tick.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{next_tick, wall_now_ms};
use crate::live::Live;
use crate::telemetry::ingest::{Ingest, RoundStats, SharedIngest, PROMQL_QUERIES};
use crate::telemetry::promql::PromQl;

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

/// Reads a PromQL store every `round` until `shutdown` into its own `Ingest`, then copies
/// the latest readings into the shared one (held only for that copy, never while the store
/// is awaited). A failed round is logged once while it keeps failing the same way; the
/// data ages and shows stale.
async fn run_promql(
    mut mine: Ingest,
    shared: SharedIngest,
    prom: PromQl,
    live: Arc<Live>,
    fresh_ms: i64,
    round: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(round);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The failure last logged: a new one is logged (a store that first refused the
    // connection, then refused a query, says both).
    let mut failing: Option<String> = None;
    while next_tick(&mut ticker, &mut shutdown).await {
        let stats = match mine.query_promql(&prom, wall_now_ms(), fresh_ms).await {
            Ok(r) => {
                failing = None;
                r
            }
            Err(e) => {
                let text = e.to_string();
                if failing.as_deref() != Some(text.as_str()) {
                    tracing::warn!(error = %text, "PromQL query failed; readings age and show stale");
                }
                failing = Some(text);
                RoundStats {
                    targets: PROMQL_QUERIES,
                    failed: PROMQL_QUERIES,
                    ..Default::default()
                }
            }
        };
        live.metrics.record_scrape_round(&stats);
        match shared.lock() {
            Ok(mut s) => s.take_latest_from(&mine),
            Err(_) => break,
        }
    }
    tracing::info!("PromQL reader stopped");
}

/// Starts the PromQL task (into `ctx.tasks`) and returns the `Ingest` it shares with the
/// live tick. It asks the store every half of its scrape interval (`interval_ms`, at least
/// a second), so what the tick shows is at most one and a half intervals old while the
/// store keeps up; a sample older than `fresh_ms` shows stale.
pub fn spawn_promql(
    ing: Ingest,
    prom: PromQl,
    ctx: &mut super::Context<'_>,
    interval_ms: u64,
    fresh_ms: i64,
) -> SharedIngest {
    let shared = Arc::new(std::sync::Mutex::new(ing.empty_copy()));
    ctx.tasks.push(tokio::spawn(run_promql(
        ing,
        Arc::clone(&shared),
        prom,
        Arc::clone(ctx.live),
        fresh_ms,
        Duration::from_millis((interval_ms / 2).max(1000)),
        ctx.stop.clone(),
    )));
    shared
}
