//! What a stopped server or a dead replica left unfinished, reconciled from the rows
//! and the scheduler, never by calling twice.

use std::sync::Arc;
use std::time::Duration;

use app::actions::ActionKind;
use tokio::sync::watch;

use super::{Actions, Plan, RecoverError, RECOVER_EVERY};
use crate::clock::wall_now_ms;
use crate::store::StoredTarget;

impl Actions {
    /// Reconciles every action a stopped server or a dead replica left unfinished (see the
    /// module docs): at once, then every [`RECOVER_EVERY`], until `stop`. Runs on the
    /// leader; trying again while the store or the scheduler cannot be read.
    pub async fn recover(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let wait = match self.recover_once().await {
                Ok(n) => {
                    if n > 0 {
                        tracing::info!(actions = n, "unfinished actions reconciled");
                    }
                    backoff = Duration::from_secs(1);
                    RECOVER_EVERY
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reconcile unfinished actions yet; retrying");
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    backoff / 2
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.handed.notified() => {}
                _ = stop.changed() => return,
            }
        }
    }

    async fn recover_once(self: &Arc<Self>) -> Result<usize, RecoverError> {
        // Rows of a server from before actions were durable: whether their call was made
        // is unknown, so they are closed with what the scheduler shows, never called.
        for (audit_id, action, target) in self.store.legacy_started_audit(self.started_ms).await? {
            let message = match ActionKind::parse(&action) {
                Some(kind) => match self.current(kind, &target).await? {
                    Some(c) => format!(
                        "the server stopped mid-action; the scheduler shows {}; not called again",
                        c.state
                    ),
                    None => {
                        "the server stopped mid-action; the scheduler no longer lists it".into()
                    }
                },
                // A user's change (one transaction): done or not as the user list shows.
                None => "the server stopped before the end was recorded; not retried".into(),
            };
            self.store
                .audit_finish(audit_id, "interrupted", &message, wall_now_ms())
                .await?;
        }
        let unfinished = self.store.unfinished_actions().await?;
        let mut n = 0;
        for a in unfinished {
            // This process's own, queued or running: its task carries it.
            let ours = self
                .followed
                .lock()
                .is_ok_and(|f| f.carried.contains(&a.id));
            if ours {
                continue;
            }
            n += 1;
            let tx = self.follow(a.status());
            let plan = Plan {
                id: a.id,
                kind: a.kind,
                at_ms: a.at_ms,
                reason: a.detail,
                exclude: a.exclude,
                targets: a.targets,
                recovered: true,
            };
            Arc::clone(self).execute(plan, tx).await?;
        }
        Ok(n)
    }

    /// A recovered `calling` row: the call may or may not have landed. Read the scheduler
    /// back (until the longest such a call could still take has passed) and record what
    /// it shows; never call again.
    pub(super) async fn settle(
        &self,
        plan: &Plan,
        t: &StoredTarget,
    ) -> Result<(&'static str, String), RecoverError> {
        let before: u32 = t.before.parse().unwrap_or(0);
        let called = t.called_ms.unwrap_or(plan.at_ms);
        let until = called
            + i64::try_from((self.call_within + self.verify_within).as_millis())
                .unwrap_or(i64::MAX);
        loop {
            let seen = self
                .read_back(plan.kind, &t.target, before, &plan.exclude)
                .await;
            let late = wall_now_ms() >= until;
            match seen {
                Ok(Some((true, state))) => {
                    return Ok(("ok", format!("verified after a restart: {state}")))
                }
                Ok(None) => {
                    return Ok((
                        "interrupted",
                        "the server stopped during the call, and the scheduler no longer lists \
                         it; not called again"
                            .into(),
                    ))
                }
                Ok(Some((false, state))) if late => {
                    return Ok((
                        "interrupted",
                        format!(
                            "the server stopped during the call; the scheduler shows {state}, \
                             so it did not take effect; not called again"
                        ),
                    ))
                }
                Err(e) if late => return Err(RecoverError::Scheduler(e)),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}
