//! An action's status for whoever waits on it: kept in memory while this process runs
//! it, read from the store when another replica does.

use std::sync::Arc;
use std::time::Duration;

use app::actions::ActionStatus;
use tokio::sync::watch;

use super::{Actions, KEPT_IN_MEMORY, STORE_POLL};

impl Actions {
    /// Action `id` as far as it has run. While it is unfinished and no more than `seen` of
    /// its targets have ended, waits up to `wait` for it to move on.
    pub async fn status(
        &self,
        id: i64,
        seen: usize,
        wait: Duration,
    ) -> Result<Option<ActionStatus>, crate::store::StoreError> {
        let followed = self
            .followed
            .lock()
            .ok()
            .and_then(|f| f.by_id.get(&id).cloned());
        if let Some(tx) = followed {
            let mut rx = tx.subscribe();
            let _ =
                tokio::time::timeout(wait, rx.wait_for(|s| s.finished() || s.ended() > seen)).await;
            let now = rx.borrow().clone();
            return Ok(Some(now));
        }
        // Taken on another replica (or long ago): followed through the store.
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let now = self.store.action(id).await?.map(|a| a.status());
            match &now {
                Some(s)
                    if !s.finished()
                        && s.ended() <= seen
                        && tokio::time::Instant::now() + STORE_POLL < deadline =>
                {
                    tokio::time::sleep(STORE_POLL).await
                }
                _ => return Ok(now),
            }
        }
    }

    /// Keeps `status` for followers; drops the oldest finished ones past the bound.
    pub(super) fn follow(&self, status: ActionStatus) -> Arc<watch::Sender<ActionStatus>> {
        let id = status.id;
        let tx = Arc::new(watch::Sender::new(status));
        if let Ok(mut f) = self.followed.lock() {
            // Followed already: its followers keep the sender they wait on.
            if let Some(old) = f.by_id.get(&id) {
                return Arc::clone(old);
            }
            f.by_id.insert(id, Arc::clone(&tx));
            f.order.push_back(id);
            while f.order.len() > KEPT_IN_MEMORY {
                let Some(pos) = f
                    .order
                    .iter()
                    .position(|i| f.by_id.get(i).is_none_or(|t| t.borrow().finished()))
                else {
                    break;
                };
                if let Some(old) = f.order.remove(pos) {
                    f.by_id.remove(&old);
                }
            }
        }
        tx
    }
}
