//! Drain, resume and requeue: preview, audit, call, verify.
//!
//! Every action runs the same steps, one action at a time for the whole server (so two
//! operators on one node serialize, and the second sees what the first did):
//! 1. targets resolved against a fresh read of the scheduler (a rack expands to its nodes);
//! 2. per target, an audit row written *before* anything is called; if the audit cannot be
//!    written, nothing is called;
//! 3. targets already in the requested state are not called again (retries are idempotent);
//! 4. the call; 5. the end state read back from the scheduler until it shows, or a deadline;
//! 6. the audit row completed with what was verified.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use app::actions::{ActionKind, ActionResult, ActionTargets, AffectedJob, Preview, TargetOutcome};
use app::model::{JobState, NodeState, UnixMs};

use crate::auth::{Caller, RateLimiter};
use crate::live::{wall_now_ms, Live};
use crate::scheduler::{validate_node_name, validate_reason, MAX_REASON_BYTES};
use crate::scheduler::{SchedError, SharedScheduler};
use crate::scheduler::{SchedJob, SchedNode};
use crate::store::Store;

/// Most targets in one request (a large rack or domain).
const MAX_TARGETS: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("{0}")]
    Invalid(String),
    #[error("too many actions: at most {0} per minute per user")]
    RateLimited(u32),
    #[error("{0}")]
    Scheduler(#[from] SchedError),
    #[error("the audit log cannot be written, so nothing was done")]
    Audit(#[source] crate::store::StoreError),
}

/// The action service.
pub struct Actions {
    sched: SharedScheduler,
    store: Store,
    live: Arc<Live>,
    limiter: RateLimiter,
    per_minute: u32,
    one_at_a_time: tokio::sync::Mutex<()>,
    verify_within: Duration,
}

fn has_drain(n: &SchedNode) -> bool {
    n.raw_state.iter().any(|s| s.eq_ignore_ascii_case("DRAIN"))
        || matches!(n.state, NodeState::Draining | NodeState::Drained)
}

/// Resumed: no DRAIN and not down. A brief NOT_RESPONDING right after a resume is Slurm's
/// design (it pings the node), not a failure.
fn is_resumed(n: &SchedNode) -> bool {
    !has_drain(n) && n.state != NodeState::Down
}

impl Actions {
    pub fn new(sched: SharedScheduler, store: Store, live: Arc<Live>, per_minute: u32) -> Actions {
        Actions {
            sched,
            store,
            live,
            limiter: RateLimiter::new(per_minute),
            per_minute,
            one_at_a_time: tokio::sync::Mutex::new(()),
            verify_within: Duration::from_secs(5),
        }
    }

    fn resolve_nodes(
        &self,
        t: &ActionTargets,
        known: &[SchedNode],
    ) -> Result<Vec<String>, ActionError> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for n in &t.nodes {
            validate_node_name(n).map_err(|e| ActionError::Invalid(e.to_string()))?;
            out.insert(n.clone());
        }
        if let Some(rack) = &t.rack {
            let inv = self
                .live
                .inventory()
                .ok_or_else(|| ActionError::Invalid("no inventory yet".into()))?;
            let before = out.len();
            out.extend(
                inv.nodes
                    .iter()
                    .filter(|n| &n.rack == rack)
                    .map(|n| n.name.clone()),
            );
            if out.len() == before && !inv.racks.iter().any(|r| &r.name == rack) {
                return Err(ActionError::Invalid(format!(
                    "unknown rack {:?}",
                    rack.chars().take(64).collect::<String>()
                )));
            }
        }
        if let Some(domain) = &t.domain {
            let inv = self
                .live
                .inventory()
                .ok_or_else(|| ActionError::Invalid("no inventory yet".into()))?;
            let d = inv
                .domains
                .iter()
                .find(|d| &d.name == domain)
                .ok_or_else(|| {
                    ActionError::Invalid(format!(
                        "unknown switch domain {:?}",
                        domain.chars().take(64).collect::<String>()
                    ))
                })?;
            out.extend(inv.domain_nodes(d).into_iter().map(String::from));
        }
        if out.is_empty() {
            return Err(ActionError::Invalid("no nodes given".into()));
        }
        if out.len() > MAX_TARGETS {
            return Err(ActionError::Invalid(format!(
                "more than {MAX_TARGETS} nodes"
            )));
        }
        let names: BTreeSet<&str> = known.iter().map(|n| n.name.as_str()).collect();
        if let Some(unknown) = out.iter().find(|n| !names.contains(n.as_str())) {
            return Err(ActionError::Invalid(format!(
                "the scheduler has no node {unknown:?}"
            )));
        }
        Ok(out.into_iter().collect())
    }

    async fn affected(&self, jobs: Vec<&SchedJob>, now: UnixMs) -> Vec<AffectedJob> {
        let mut out = Vec::with_capacity(jobs.len());
        for j in jobs {
            let start = j.job.start_ms;
            // The newest complete checkpoint finished before now; unknown if the store fails.
            let ckpt_end = match self.store.checkpoints(j.job.id).await {
                Ok(cs) => cs
                    .iter()
                    .filter(|c| c.complete && c.started_ms + c.duration_ms <= now)
                    .map(|c| c.started_ms + c.duration_ms)
                    .filter(|&end| start.is_none_or(|s| end >= s))
                    .max(),
                Err(e) => {
                    tracing::warn!(error = %e, "checkpoint lookup failed");
                    None
                }
            };
            let since = ckpt_end.or(start);
            out.push(AffectedJob {
                id: j.job.id,
                name: j.job.name.clone(),
                user: j.job.user.clone(),
                gpus: j.job.gpus,
                nodes: j.job.nodes.clone(),
                running_since_ms: start,
                last_checkpoint_age_ms: ckpt_end.map(|e| (now - e).max(0)),
                work_at_risk_gpu_hours: since
                    .map(|s| f64::from(j.job.gpus) * (now - s).max(0) as f64 / 3_600_000.0),
            });
        }
        out
    }

    /// What `kind` on `t` would do, from a fresh read of the scheduler.
    pub async fn preview(
        &self,
        kind: ActionKind,
        t: &ActionTargets,
    ) -> Result<Preview, ActionError> {
        // The source's now (simulated time with the simulator), for checkpoint ages.
        let now = self.live.source_now();
        let jobs = self.sched.jobs().await?;
        let running: Vec<&SchedJob> = jobs
            .iter()
            .filter(|j| j.job.state == JobState::Running)
            .collect();
        let (targets, already, hit): (Vec<String>, Vec<String>, Vec<&SchedJob>) = if kind.on_nodes()
        {
            let nodes = self.sched.nodes().await?;
            let targets = self.resolve_nodes(t, &nodes)?;
            let by_name: HashMap<&str, &SchedNode> =
                nodes.iter().map(|n| (n.name.as_str(), n)).collect();
            let already = targets
                .iter()
                .filter(|n| {
                    by_name.get(n.as_str()).is_some_and(|x| match kind {
                        ActionKind::Drain => has_drain(x),
                        _ => is_resumed(x),
                    })
                })
                .cloned()
                .collect();
            let set: BTreeSet<&str> = targets.iter().map(String::as_str).collect();
            let hit = if kind == ActionKind::Drain {
                running
                    .iter()
                    .copied()
                    .filter(|j| j.job.nodes.iter().any(|n| set.contains(n.as_str())))
                    .collect()
            } else {
                Vec::new()
            };
            (targets, already, hit)
        } else {
            if t.jobs.is_empty() {
                return Err(ActionError::Invalid("no jobs given".into()));
            }
            if t.jobs.len() > MAX_TARGETS {
                return Err(ActionError::Invalid(format!(
                    "more than {MAX_TARGETS} jobs"
                )));
            }
            let ids: BTreeSet<u64> = t.jobs.iter().copied().collect();
            if let Some(missing) = ids.iter().find(|id| !jobs.iter().any(|j| j.job.id == **id)) {
                return Err(ActionError::Invalid(format!(
                    "the scheduler has no job {missing}"
                )));
            }
            let already = jobs
                .iter()
                .filter(|j| ids.contains(&j.job.id) && j.job.state == JobState::Pending)
                .map(|j| j.job.id.to_string())
                .collect();
            let hit = running
                .iter()
                .copied()
                .filter(|j| ids.contains(&j.job.id))
                .collect();
            (ids.iter().map(u64::to_string).collect(), already, hit)
        };
        let jobs = self.affected(hit, now).await;
        let gpus_affected: u32 = jobs.iter().map(|j| j.gpus).sum();
        let risk: Option<f64> = jobs
            .iter()
            .map(|j| j.work_at_risk_gpu_hours)
            .sum::<Option<f64>>();
        let to_do = targets.len() - already.len();
        let summary = match kind {
            ActionKind::Drain => format!(
                "Drain {to_do} node(s){}. {} running job(s) on {gpus_affected} GPUs keep running until they end; no new job starts there.",
                if already.is_empty() { String::new() } else { format!(" ({} already drained)", already.len()) },
                jobs.len()
            ),
            ActionKind::Resume => format!(
                "Resume {to_do} node(s){}: they take new jobs again.",
                if already.is_empty() { String::new() } else { format!(" ({} not drained or down)", already.len()) }
            ),
            ActionKind::Requeue | ActionKind::RequeueHold => format!(
                "Requeue {} running job(s) on {gpus_affected} GPUs: they are stopped now and restart from their last checkpoint{}.",
                jobs.len(),
                if kind == ActionKind::RequeueHold { " once released (held)" } else { " when Slurm schedules them (about 2 minutes at the earliest)" }
            ),
        };
        Ok(Preview {
            action: kind,
            targets,
            already,
            jobs,
            gpus_affected,
            work_at_risk_gpu_hours: risk,
            summary,
        })
    }

    /// Runs `kind` on `t` as `caller`: audited, called, verified.
    pub async fn run(
        &self,
        caller: &Caller,
        kind: ActionKind,
        t: &ActionTargets,
        reason: Option<&str>,
    ) -> Result<ActionResult, ActionError> {
        let (Some(user), Some(role)) = (caller.user.as_deref(), caller.role) else {
            return Err(ActionError::Invalid("actions need a signed-in user".into()));
        };
        let slurm_reason = match kind {
            ActionKind::Drain => {
                let r = reason.unwrap_or("").trim();
                // Stored in Slurm prefixed with who acted.
                let full = format!("{user}: {r}");
                validate_reason(r).map_err(|e| ActionError::Invalid(e.to_string()))?;
                if full.len() > MAX_REASON_BYTES {
                    return Err(ActionError::Invalid("reason is too long".into()));
                }
                Some(full)
            }
            _ => None,
        };
        if !self.limiter.allow(user) {
            return Err(ActionError::RateLimited(self.per_minute));
        }
        let _turn = self.one_at_a_time.lock().await;
        let plan = self.preview(kind, t).await?;
        let detail = slurm_reason.clone().unwrap_or_default();
        let mut outcomes = Vec::with_capacity(plan.targets.len());
        for target in &plan.targets {
            let audit_id = self
                .store
                .audit_begin(wall_now_ms(), user, role, kind.as_str(), target, &detail)
                .await
                .map_err(ActionError::Audit)?;
            let (status, message) = if plan.already.contains(target) {
                (
                    "already",
                    match kind {
                        ActionKind::Drain => "already drained; nothing called".to_string(),
                        ActionKind::Resume => "not drained or down; nothing called".to_string(),
                        _ => "pending, not running; nothing to requeue".to_string(),
                    },
                )
            } else {
                self.act_and_verify(kind, target, slurm_reason.as_deref())
                    .await
            };
            if let Err(e) = self
                .store
                .audit_finish(audit_id, status, &message, wall_now_ms())
                .await
            {
                // The action happened; its row stays 'started', which the audit page shows.
                tracing::error!(error = %e, audit_id, "audit row could not be completed");
            }
            tracing::info!(user, action = kind.as_str(), target = %target, status, "action");
            outcomes.push(TargetOutcome {
                target: target.clone(),
                status: status.into(),
                message,
                audit_id,
            });
        }
        self.live.poke();
        Ok(ActionResult {
            action: kind,
            outcomes,
        })
    }

    async fn act_and_verify(
        &self,
        kind: ActionKind,
        target: &str,
        reason: Option<&str>,
    ) -> (&'static str, String) {
        let job_id = target.parse::<u64>().unwrap_or(0);
        let restarts_before = if kind.on_nodes() {
            0
        } else {
            match self.sched.jobs().await {
                Ok(js) => js
                    .iter()
                    .find(|j| j.job.id == job_id)
                    .map(|j| j.restart_count)
                    .unwrap_or(0),
                Err(e) => return ("failed", e.to_string()),
            }
        };
        let called = match kind {
            ActionKind::Drain => self.sched.drain(target, reason.unwrap_or("")).await,
            ActionKind::Resume => self.sched.resume(target).await,
            ActionKind::Requeue => self.sched.requeue(job_id, false).await,
            ActionKind::RequeueHold => self.sched.requeue(job_id, true).await,
        };
        if let Err(e) = called {
            return ("failed", e.to_string());
        }
        let deadline = tokio::time::Instant::now() + self.verify_within;
        loop {
            let seen = if kind.on_nodes() {
                self.sched.nodes().await.map(|ns| {
                    ns.iter().find(|n| n.name == target).map(|n| match kind {
                        ActionKind::Drain => (has_drain(n), n.raw_state.join("+")),
                        _ => (is_resumed(n), n.raw_state.join("+")),
                    })
                })
            } else {
                self.sched.jobs().await.map(|js| {
                    js.iter().find(|j| j.job.id == job_id).map(|j| {
                        (
                            j.restart_count > restarts_before,
                            format!("{} (restarts {})", j.raw_state.join("+"), j.restart_count),
                        )
                    })
                })
            };
            match seen {
                Ok(Some((true, state))) => return ("ok", format!("verified: {state}")),
                Ok(Some((false, state))) if tokio::time::Instant::now() >= deadline => {
                    return (
                        "unverified",
                        format!("called, but the scheduler still shows {state}"),
                    )
                }
                Ok(None) => {
                    return (
                        "unverified",
                        "called, but the scheduler no longer lists it".into(),
                    )
                }
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return (
                        "unverified",
                        format!("called, but reading back failed: {e}"),
                    )
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}
