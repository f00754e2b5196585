//! The clocks every task reads: the wall clock, read only here (at the edge) and passed
//! inward as Unix milliseconds, and the next tick of a periodic task, which ends at its
//! shutdown. Under everything: imports nothing of the crate.

use app::model::UnixMs;
use tokio::sync::watch;

/// Waits for the next tick of a periodic task; false once `shutdown` is signalled.
pub async fn next_tick(
    ticker: &mut tokio::time::Interval,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        _ = ticker.tick() => {}
        _ = shutdown.changed() => return false,
    }
    !*shutdown.borrow()
}

/// Wall-clock Unix ms: read only here, at the edge, and passed inward.
pub fn wall_now_ms() -> UnixMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMs)
        .unwrap_or(0)
}
