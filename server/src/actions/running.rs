//! One action carried through: its targets in order under the turn, each row written
//! before and after its call, and a stop that says exactly what was done.

use std::sync::Arc;

use app::actions::{ActionKind, ActionStatus};
use tokio::sync::watch;

use super::{Actions, Plan, RecoverError, RowFailed, RESUME_WITHIN_MS};
use crate::clock::wall_now_ms;
use crate::store::StoredTarget;

impl Actions {
    /// Runs a plan's targets in order; `Err` only when a recovered action's `calling` row
    /// cannot be settled yet (the scheduler cannot be read): it is tried again later.
    pub(super) async fn execute(
        self: Arc<Self>,
        plan: Plan,
        tx: Arc<watch::Sender<ActionStatus>>,
    ) -> Result<(), RecoverError> {
        if let Ok(mut f) = self.followed.lock() {
            f.carried.insert(plan.id);
        }
        let id = plan.id;
        let ran = self.execute_carried(plan, tx).await;
        if let Ok(mut f) = self.followed.lock() {
            f.carried.remove(&id);
        }
        ran
    }

    async fn execute_carried(
        &self,
        plan: Plan,
        tx: Arc<watch::Sender<ActionStatus>>,
    ) -> Result<(), RecoverError> {
        let _ours = self.one_at_a_time.lock().await;
        // The turn across replicas; then what the store shows is the whole truth, since
        // nobody else runs an action meanwhile.
        let fresh = async {
            let turn = self.store.action_turn().await?;
            let a = self.store.action(plan.id).await?;
            Ok::<_, crate::store::StoreError>((turn, a))
        };
        let (mut turn, fresh) = match fresh.await {
            Ok((turn, Some(a))) => (turn, a),
            Ok((turn, None)) => {
                turn.release().await;
                return Ok(());
            }
            Err(error) if plan.recovered => return Err(error.into()),
            Err(error) => {
                self.stop_before_any_call(&plan, &tx, error).await;
                return Ok(());
            }
        };
        if fresh.state != "queued" && fresh.state != "running" {
            // Carried through elsewhere (a leader reconciling it, or another task).
            tx.send_replace(fresh.status());
            turn.release().await;
            return Ok(());
        }
        // "running" with the turn free: its runner died mid-way.
        let plan = Plan {
            recovered: plan.recovered || fresh.state == "running",
            targets: fresh.targets.clone(),
            ..plan
        };
        let state = tx.borrow().state.clone();
        tx.send_replace(ActionStatus {
            state,
            ..fresh.status()
        });
        let ran = self.run_plan(&plan, &tx, &mut turn).await;
        turn.release().await;
        ran
    }

    /// Runs a plan's targets in order under the turn.
    async fn run_plan(
        &self,
        plan: &Plan,
        tx: &watch::Sender<ActionStatus>,
        turn: &mut crate::store::ActionTurn,
    ) -> Result<(), RecoverError> {
        if let Err(error) = self
            .store
            .action_set_state(plan.id, "running", "", None)
            .await
        {
            self.stop_before_any_call(plan, tx, error).await;
            return Ok(());
        }
        tx.send_modify(|s| s.state = "running".into());
        for (i, t) in plan.targets.iter().enumerate() {
            if matches!(t.status.as_str(), "pending" | "calling") && !turn.held().await {
                // The database lost the connection that holds the turn, and with it the
                // lock: another replica may take the action up. Stop here as a crash would;
                // whoever takes it next reconciles from the rows.
                tracing::warn!(id = plan.id, target = %t.target, "action turn lost: left for reconciliation");
                return Ok(());
            }
            let end = match t.status.as_str() {
                "pending" if plan.recovered && wall_now_ms() - plan.at_ms > RESUME_WITHIN_MS => {
                    let msg = format!(
                        "not run: the server stopped before this target, and the action was \
                         over {} minutes old when it started again",
                        RESUME_WITHIN_MS / 60_000
                    );
                    self.finish_row(t, "interrupted", &msg, false).await
                }
                "pending" => self.run_target(plan, t, tx, i).await,
                "calling" => {
                    let (status, message) = self.settle(plan, t).await?;
                    self.finish_row(t, status, &message, true).await
                }
                _ => continue,
            };
            match end {
                Ok((status, message)) => {
                    tracing::info!(id = plan.id, action = plan.kind.as_str(), target = %t.target, status, "action target");
                    tx.send_modify(|s| {
                        if let Some(o) = s.outcomes.get_mut(i) {
                            o.status = status.into();
                            o.message = message;
                        }
                    });
                }
                Err(failed) => {
                    self.stop(plan, tx, Some(i), failed).await;
                    return Ok(());
                }
            }
        }
        let now = wall_now_ms();
        if let Err(e) = self
            .store
            .action_set_state(plan.id, "done", "", Some(now))
            .await
        {
            // Every target's row is at its end; only the action's own row is not (a restart
            // finds nothing left to do in it and closes it).
            tracing::error!(id = plan.id, error = %e, "action's end could not be recorded");
        }
        tx.send_modify(|s| {
            s.state = "done".into();
            s.finished_ms = Some(now);
        });
        self.poke().await;
        Ok(())
    }

    /// One pending target: read, mark `calling`, call, verify, complete its row.
    async fn run_target(
        &self,
        plan: &Plan,
        t: &StoredTarget,
        tx: &watch::Sender<ActionStatus>,
        i: usize,
    ) -> Result<(&'static str, String), RowFailed> {
        let current = match self.current(plan.kind, &t.target).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return self
                    .finish_row(
                        t,
                        "failed",
                        "the scheduler no longer lists it; nothing called",
                        false,
                    )
                    .await
            }
            Err(e) => {
                let msg =
                    format!("reading the scheduler before the call failed: {e}; nothing called");
                return self.finish_row(t, "failed", &msg, false).await;
            }
        };
        if current.done {
            let msg = match plan.kind {
                ActionKind::Drain => "already drained; nothing called",
                ActionKind::Resume => "not drained or down; nothing called",
                _ => "pending, not running; nothing to requeue",
            };
            return self.finish_row(t, "already", msg, false).await;
        }
        let before = current.restarts.to_string();
        match self
            .store
            .audit_calling(t.audit_id, wall_now_ms(), &before)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Err(RowFailed {
                    called: false,
                    error: crate::store::StoreError::Corrupt(format!(
                        "audit row {} was no longer pending",
                        t.audit_id
                    )),
                })
            }
            Err(error) => {
                return Err(RowFailed {
                    called: false,
                    error,
                })
            }
        }
        tx.send_modify(|s| {
            if let Some(o) = s.outcomes.get_mut(i) {
                o.status = "calling".into();
            }
        });
        let (status, message) = self
            .act_and_verify(plan.kind, &t.target, &plan.reason, &current, &plan.exclude)
            .await;
        self.finish_row(t, status, &message, true).await
    }

    /// Completes a target's audit row.
    async fn finish_row(
        &self,
        t: &StoredTarget,
        status: &'static str,
        message: &str,
        called: bool,
    ) -> Result<(&'static str, String), RowFailed> {
        self.store
            .audit_finish(t.audit_id, status, message, wall_now_ms())
            .await
            .map_err(|error| RowFailed { called, error })?;
        Ok((status, message.to_string()))
    }

    /// Stops an action whose store failed before any target was called.
    async fn stop_before_any_call(
        &self,
        plan: &Plan,
        tx: &watch::Sender<ActionStatus>,
        error: crate::store::StoreError,
    ) {
        let failed = RowFailed {
            called: false,
            error,
        };
        self.stop(plan, tx, None, failed).await;
    }

    /// Stops an action whose audit log cannot be written, saying exactly what was done.
    async fn stop(
        &self,
        plan: &Plan,
        tx: &watch::Sender<ActionStatus>,
        at: Option<usize>,
        failed: RowFailed,
    ) {
        let outcomes = tx.borrow().outcomes.clone();
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let done = list(
            outcomes
                .iter()
                .filter(|o| o.finished())
                .map(|o| format!("{} ({})", o.target, o.status))
                .collect(),
        );
        let note = match at {
            None => "stopped: the audit log cannot be written, so nothing was done".to_string(),
            Some(i) => {
                let here = outcomes.get(i).map(|o| o.target.as_str()).unwrap_or("?");
                let not_done = list(
                    outcomes
                        .iter()
                        .skip(i + 1)
                        .filter(|o| !o.finished())
                        .map(|o| o.target.clone())
                        .collect(),
                );
                format!(
                    "stopped: the audit log could not be written at {here} ({}); done before it: \
                     {done}; not done: {not_done}",
                    if failed.called {
                        "its call was made; reconciled by the leader"
                    } else {
                        "not called"
                    }
                )
            }
        };
        tracing::error!(id = plan.id, error = %failed.error, note = %note, "action stopped");
        let now = wall_now_ms();
        if let Err(e) = self
            .store
            .action_set_state(plan.id, "stopped", &note, Some(now))
            .await
        {
            tracing::error!(id = plan.id, error = %e, "the stop could not be recorded either");
        }
        tx.send_modify(|s| {
            s.state = "stopped".into();
            s.note = note;
            s.finished_ms = Some(now);
        });
        self.poke().await;
    }
}
