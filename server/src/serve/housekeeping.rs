//! The leader's housekeeping, each a loop of its own until the term's stop: rollup and
//! session retention, the floor's lemon marks, and the LDAP directory's second look at
//! signed-in users. `serve.rs` starts them with the term; none publishes a tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::{next_tick, wall_now_ms};
use crate::live::Live;
use crate::store::Store;

/// Looks the signed-in LDAP users up again every `check_seconds` (the leader only): a
/// user the directory no longer knows, or no longer gives a role, is signed out everywhere.
pub async fn directory_check(
    dir: Arc<crate::auth::ldap::Directory>,
    store: Store,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(dir.check_every());
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while next_tick(&mut ticker, &mut shutdown).await {
        if let Err(e) = crate::auth::check_directory_users(&store, &dir).await {
            tracing::warn!(error = %e, "the directory check could not finish: no session ended by it");
        }
    }
}

/// Keeps the floor's lemon marks: the recent reliability's RMA marks, looked at every
/// 15 s (the answer itself is rebuilt only every 10 minutes of source time).
pub async fn lemon_marks(
    recent: Arc<crate::reliability::Recent>,
    store: Store,
    live: Arc<Live>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(Duration::from_secs(15));
    while next_tick(&mut ticker, &mut shutdown).await {
        let Some(inv) = live.inventory() else {
            continue;
        };
        match recent.get(&store, &inv, live.source_now()).await {
            Ok(r) => live.set_lemons(
                r.lemons
                    .iter()
                    .filter(|l| l.rma)
                    .map(|l| l.node.clone())
                    .collect(),
            ),
            Err(e) => tracing::warn!(error = %e, "lemon marks not refreshed"),
        }
    }
}

/// Keeps rollups for their configured days (counted in source time, which the rollups are
/// stamped with) and drops expired sessions; once at start, then hourly.
pub async fn retention(
    store: Store,
    live: Arc<Live>,
    days_1m: u32,
    days_1h: u32,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(Duration::from_secs(3600));
    while next_tick(&mut ticker, &mut shutdown).await {
        let Some(now) = live.current().map(|t| t.overview.at_ms) else {
            continue;
        };
        let day = 86_400_000i64;
        let r1 = store.prune_rollups(now - i64::from(days_1m) * day).await;
        let r2 = store.prune_rollups_1h(now - i64::from(days_1h) * day).await;
        // Report rollups are hourly too, and kept as long.
        let r2 = match (
            r2,
            store
                .prune_report_rollups(now - i64::from(days_1h) * day)
                .await,
        ) {
            (Ok(a), Ok(b)) => Ok(a + b),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        match (r1, r2) {
            (Ok(a), Ok(b)) if a + b > 0 => tracing::info!(
                minute_rows = a,
                hour_rows = b,
                "rollups past retention removed"
            ),
            (Err(e), _) | (_, Err(e)) => tracing::warn!(error = %e, "rollup retention failed"),
            _ => {}
        }
        crate::auth::prune_sessions_now(&store, wall_now_ms()).await;
    }
}
