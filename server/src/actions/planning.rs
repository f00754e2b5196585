//! An action planned: targets resolved against a fresh read of the scheduler, what it
//! would do (the preview), and the action recorded and started in a task of its own.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use app::actions::{ActionKind, ActionStatus, ActionTargets, AffectedJob, Preview};
use app::model::{JobState, UnixMs};

use super::{
    verify::{has_drain, is_resumed},
    ActionError, Actions, Plan, MAX_EXCLUDED, MAX_TARGETS, MAX_TYPED_REASON_CHARS,
};
use crate::auth::Caller;
use crate::clock::wall_now_ms;
use crate::scheduler::{validate_node_name, validate_reason, SchedError, SchedJob, SchedNode};
use crate::store::{StoredAction, StoredTarget};

impl Actions {
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
                return Err(ActionError::Unknown(format!(
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
                    ActionError::Unknown(format!(
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
            return Err(ActionError::Unknown(format!(
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
                    .filter(|c| c.complete && c.started_ms.saturating_add(c.duration_ms) <= now)
                    .map(|c| c.started_ms.saturating_add(c.duration_ms))
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

    /// Jobs, and nodes if `with_nodes`: a fresh read of the scheduler, or on a replica that
    /// cannot call it (a simulator's standby) what the leader published last.
    async fn scheduler_state(
        &self,
        with_nodes: bool,
    ) -> Result<(Vec<SchedJob>, Vec<SchedNode>), ActionError> {
        if !self.sched.runs_here() {
            let s = self.live.sched().ok_or_else(|| {
                ActionError::Scheduler(SchedError::Unavailable(
                    "the leading replica has published no scheduler state yet".into(),
                ))
            })?;
            return Ok((s.jobs.clone(), s.nodes.clone()));
        }
        let jobs = self.sched.jobs().await?;
        let nodes = if with_nodes {
            self.sched.nodes().await?
        } else {
            Vec::new()
        };
        Ok((jobs, nodes))
    }

    /// What `kind` on `t` would do, from a fresh read of the scheduler.
    pub async fn preview(
        &self,
        kind: ActionKind,
        t: &ActionTargets,
    ) -> Result<Preview, ActionError> {
        // The source's now (simulated time with the simulator), for checkpoint ages.
        let now = self.live.source_now();
        let requeue = matches!(kind, ActionKind::Requeue | ActionKind::RequeueHold);
        if !t.exclude.is_empty() && !requeue {
            return Err(ActionError::Invalid(
                "exclude: only a requeue keeps its jobs off nodes".into(),
            ));
        }
        if t.exclude.len() > MAX_EXCLUDED {
            return Err(ActionError::Invalid(format!(
                "exclude: at most {MAX_EXCLUDED} nodes"
            )));
        }
        for n in &t.exclude {
            validate_node_name(n).map_err(|e| ActionError::Invalid(format!("exclude: {e}")))?;
        }
        let (jobs, nodes) = self
            .scheduler_state(kind.on_nodes() || !t.exclude.is_empty())
            .await?;
        if let Some(unknown) = t
            .exclude
            .iter()
            .find(|x| !nodes.iter().any(|n| &n.name == *x))
        {
            return Err(ActionError::Unknown(format!(
                "exclude: the scheduler has no node {unknown:?}"
            )));
        }
        let running: Vec<&SchedJob> = jobs
            .iter()
            .filter(|j| j.job.state == JobState::Running)
            .collect();
        let mut segments = Vec::new();
        let (targets, already, hit): (Vec<String>, Vec<String>, Vec<&SchedJob>) = if kind.on_nodes()
        {
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
            if let (ActionKind::Drain, Some(inv)) = (kind, self.live.inventory()) {
                segments = crate::cluster::segments::drain_impact(&inv, &nodes, &jobs, &targets);
            }
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
                return Err(ActionError::Unknown(format!(
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
                "Drain {to_do} node(s){}. {} running job(s) on {gpus_affected} GPUs keep running until they end; no new job starts there.{}",
                if already.is_empty() { String::new() } else { format!(" ({} already drained)", already.len()) },
                jobs.len(),
                if segments.is_empty() { String::new() } else { format!(" Segments: {}.", segments.join("; ")) }
            ),
            ActionKind::Resume => format!(
                "Resume {to_do} node(s){}: they take new jobs again.",
                if already.is_empty() { String::new() } else { format!(" ({} not drained or down)", already.len()) }
            ),
            ActionKind::Requeue | ActionKind::RequeueHold => format!(
                "Requeue {} running job(s) on {gpus_affected} GPUs: they are stopped now and restart from their last checkpoint{}.{}",
                jobs.len(),
                if kind == ActionKind::RequeueHold { " once released (held)" } else { " when Slurm schedules them (about 2 minutes at the earliest)" },
                if t.exclude.is_empty() { String::new() } else { format!(" They never run on {} again (Slurm's ExcNodeList).", t.exclude.join(", ")) }
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

    /// Records `kind` on `t` as `caller` and starts it in a task of its own; answers at
    /// once with its status (`queued`). Bad input, the rate limit, a scheduler that cannot
    /// be read and an audit log that cannot be written refuse it before anything is
    /// recorded or called.
    pub async fn submit(
        self: &Arc<Self>,
        caller: &Caller,
        kind: ActionKind,
        t: &ActionTargets,
        reason: Option<&str>,
    ) -> Result<ActionStatus, ActionError> {
        if self.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ActionError::Stopping);
        }
        let (Some(user), Some(role)) = (caller.user.as_deref(), caller.role) else {
            return Err(ActionError::Invalid("actions need a signed-in user".into()));
        };
        // Why, for every action but a resume: a drain's goes to Slurm, a requeue's to the
        // audit log (Slurm keeps none for it).
        let slurm_reason = match kind {
            ActionKind::Drain | ActionKind::Requeue | ActionKind::RequeueHold => {
                let r = reason.unwrap_or("").trim();
                // What a person types is bounded on its own, so that with the prefix of who
                // acted (a user name is at most 64 bytes) it always fits Slurm's reason.
                if r.chars().count() > MAX_TYPED_REASON_CHARS {
                    return Err(ActionError::Invalid(format!(
                        "reason: at most {MAX_TYPED_REASON_CHARS} characters"
                    )));
                }
                validate_reason(r).map_err(|e| ActionError::Invalid(e.to_string()))?;
                // Stored prefixed with who acted.
                format!("{user}: {r}")
            }
            _ => String::new(),
        };
        // A cheap check in this process first, so a flood costs no scheduler read; the
        // limit across replicas is the store's count when the action is recorded.
        if !self.limiter.allow(user) {
            return Err(ActionError::RateLimited(self.per_minute));
        }
        let plan = self.preview(kind, t).await?;
        let at_ms = wall_now_ms();
        let (id, audit_ids) = self
            .store
            .action_record_limited(
                &crate::store::NewAction {
                    at_ms,
                    user,
                    role,
                    kind,
                    detail: &slurm_reason,
                    exclude: &t.exclude,
                    targets: &plan.targets,
                },
                Some(self.per_minute),
            )
            .await
            .map_err(ActionError::Audit)?
            .ok_or(ActionError::RateLimited(self.per_minute))?;
        let targets: Vec<StoredTarget> = audit_ids
            .into_iter()
            .zip(plan.targets)
            .map(|(audit_id, target)| StoredTarget {
                audit_id,
                target,
                status: "pending".into(),
                result: String::new(),
                called_ms: None,
                before: String::new(),
            })
            .collect();
        let status = StoredAction {
            id,
            at_ms,
            user: user.into(),
            role,
            kind,
            detail: slurm_reason.clone(),
            exclude: t.exclude.clone(),
            state: "queued".into(),
            note: String::new(),
            finished_ms: None,
            targets: targets.clone(),
        }
        .status();
        tracing::info!(
            user,
            action = kind.as_str(),
            id,
            targets = targets.len(),
            "action recorded"
        );
        if !self.sched.runs_here() {
            // The leader runs it (its recovery takes every unfinished action); this replica
            // follows it through the store.
            tracing::info!(id, "action handed to the leading replica");
            self.poke().await;
            return Ok(status);
        }
        let tx = self.follow(status.clone());
        if let Ok(mut f) = self.followed.lock() {
            f.carried.insert(id);
        }
        let this = Arc::clone(self);
        let plan = Plan {
            id,
            kind,
            at_ms,
            reason: slurm_reason,
            exclude: t.exclude.clone(),
            targets,
            recovered: false,
        };
        tokio::spawn(async move {
            if let Err(e) = this.execute(plan, tx).await {
                // Only a recovered action waits for the scheduler; a new one has no
                // `calling` rows to settle.
                tracing::error!(id, error = %e, "action could not be run");
            }
        });
        Ok(status)
    }
}
