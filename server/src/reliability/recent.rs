//! The last 30 days' reliability answer, kept for a few minutes: what the job page's
//! checkpoint advice and the nodes' lemon marks read, so a page view never attributes a
//! month of history itself.

use std::sync::Arc;

use app::model::{Inventory, UnixMs};
use app::reliability::Reliability;
use app::reports::{Period, ReportQuery};

use super::ReliabilityError;
use crate::store::Store;

/// Days the recent answer covers (today so far and the 29 before it).
pub const RECENT_DAYS: i64 = 30;
/// How long an answer is reused, in the source's time.
pub const REUSE_MS: i64 = 10 * 60_000;

#[derive(Default)]
pub struct Recent {
    /// One refresh at a time; others wait for it and take its answer.
    cell: tokio::sync::Mutex<Option<(UnixMs, Arc<Reliability>)>>,
}

impl Recent {
    /// The answer for the 30 days up to `now_ms`, at most [`REUSE_MS`] old.
    pub async fn get(
        &self,
        store: &Store,
        inv: &Inventory,
        now_ms: UnixMs,
    ) -> Result<Arc<Reliability>, ReliabilityError> {
        let mut cell = self.cell.lock().await;
        if let Some((at, r)) = cell.as_ref() {
            if (now_ms - at).abs() < REUSE_MS {
                return Ok(Arc::clone(r));
            }
        }
        let q = ReportQuery {
            period: Period::Custom,
            from: Some(app::units::date(now_ms - (RECENT_DAYS - 1) * 86_400_000)),
            to: Some(app::units::date(now_ms)),
            ..ReportQuery::default()
        };
        let (r, _, _) = super::build(store, inv, &q, now_ms).await?;
        let r = Arc::new(r);
        *cell = Some((now_ms, Arc::clone(&r)));
        Ok(r)
    }
}
