//! Drain, resume and requeue as durable work: preview, record, call, verify, reconcile.
//!
//! An action is recorded before anything is called, then runs in a task of its own,
//! detached from the request that asked for it (a timeout or a closed browser changes
//! nothing), one action at a time for the whole server (so two operators on one node
//! serialize, and the second sees what the first did):
//! 1. targets resolved against a fresh read of the scheduler (a rack expands to its nodes);
//! 2. the action and every target's audit row (`pending`) written in one transaction; if
//!    that fails, nothing is called, and the request says so;
//! 3. per target, in order: the scheduler read again; a target already in the requested
//!    state is not called (`already`); else its row becomes `calling` (with what the
//!    read-back compares against) *before* the call; the call; the end state read back
//!    until it shows or a deadline; the row completed with what was verified;
//! 4. if a row cannot be written mid-action, the action stops there and says exactly which
//!    targets were done (held in memory and logged, since the log itself failed).
//!
//! At start-up, [`Actions::recover`] reconciles every unfinished action target by target:
//! a `calling` row is settled by reading the scheduler back (after the longest a cut-off
//! call could still land), never by calling again; `pending` rows are run if the action is
//! recent ([`RESUME_WITHIN_MS`]), else marked `interrupted`. No target is called twice.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::actions::{ActionKind, ActionStatus, ActionTargets, AffectedJob, Preview};
use app::model::{JobState, NodeState, UnixMs};
use tokio::sync::watch;

use crate::auth::{Caller, RateLimiter};
use crate::live::{wall_now_ms, Live};
use crate::scheduler::{validate_node_name, validate_reason, MAX_REASON_BYTES};
use crate::scheduler::{SchedError, SharedScheduler};
use crate::scheduler::{SchedJob, SchedNode};
use crate::store::{Store, StoredAction, StoredTarget};

/// The longest drain reason a person may type, in characters: with `user: ` before it
/// (names are at most 64 bytes) it stays within [`MAX_REASON_BYTES`] however wide its
/// characters (4 bytes at most each).
pub const MAX_TYPED_REASON_CHARS: usize = 900;
const _: () = assert!(4 * MAX_TYPED_REASON_CHARS + 64 + 2 <= MAX_REASON_BYTES);

/// Most targets in one request (a large rack or domain).
const MAX_TARGETS: usize = 512;

/// An action found unfinished at start-up runs its remaining targets only if it was
/// recorded this recently; older ones are marked `interrupted` (an operator who asked
/// for a drain an hour ago may not want it now).
pub const RESUME_WITHIN_MS: i64 = 10 * 60 * 1000;

/// Statuses of actions kept in memory for followers (finished ones are dropped oldest
/// first beyond this; the store has them all).
const KEPT_IN_MEMORY: usize = 256;

/// How often the leader looks for actions a dead replica left unfinished.
const RECOVER_EVERY: Duration = Duration::from_secs(15);

/// How often a follower of an action run elsewhere reads its rows.
const STORE_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("{0}")]
    Invalid(String),
    /// A well-formed request naming a node, rack, domain or job the scheduler does not have.
    #[error("{0}")]
    Unknown(String),
    #[error("too many actions: at most {0} per minute per user")]
    RateLimited(u32),
    #[error("{0}")]
    Scheduler(#[from] SchedError),
    #[error("the audit log cannot be written, so nothing was done")]
    Audit(#[source] crate::store::StoreError),
    #[error("the server is stopping: no new actions")]
    Stopping,
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
    /// The longest a scheduler call may take (its transport's timeout): a call cut off by
    /// a crash may still land until then.
    call_within: Duration,
    /// Actions this process runs or ran, for followers.
    followed: Mutex<Followed>,
    /// Set by [`Actions::close`]: no new actions.
    closing: std::sync::atomic::AtomicBool,
    /// When this process made the service: rows older than it are a previous server's.
    started_ms: UnixMs,
    /// Wakes [`Actions::recover`] before its next round: another replica handed over an
    /// action it cannot run itself.
    handed: tokio::sync::Notify,
}

#[derive(Default)]
struct Followed {
    by_id: HashMap<i64, Arc<watch::Sender<ActionStatus>>>,
    order: VecDeque<i64>,
    /// Actions a task of this process carries now (queued for the turn or running).
    carried: std::collections::HashSet<i64>,
}

/// Why a target could not be carried through: its row could not be written.
struct RowFailed {
    /// Whether the scheduler was called for it before the write failed.
    called: bool,
    error: crate::store::StoreError,
}

/// One action on its way: what the runner needs.
struct Plan {
    id: i64,
    kind: ActionKind,
    at_ms: UnixMs,
    /// The drain reason as stored in Slurm, else empty.
    reason: String,
    targets: Vec<StoredTarget>,
    /// Found unfinished at start-up (its `calling` rows are settled by reading back).
    recovered: bool,
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
    /// `call_within`: the scheduler transport's timeout per call.
    pub fn new(
        sched: SharedScheduler,
        store: Store,
        live: Arc<Live>,
        per_minute: u32,
        call_within: Duration,
    ) -> Actions {
        Actions {
            sched,
            store,
            live,
            limiter: RateLimiter::new(per_minute),
            per_minute,
            one_at_a_time: tokio::sync::Mutex::new(()),
            verify_within: Duration::from_secs(5),
            call_within,
            followed: Mutex::new(Followed::default()),
            closing: std::sync::atomic::AtomicBool::new(false),
            started_ms: wall_now_ms(),
            handed: tokio::sync::Notify::new(),
        }
    }

    /// Another replica recorded an action for this one (the leader) to run: look now.
    pub fn wake(&self) {
        self.handed.notify_one();
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
        let (jobs, nodes) = self.scheduler_state(kind.on_nodes()).await?;
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
                segments = crate::segments::drain_impact(&inv, &nodes, &jobs, &targets);
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
        let slurm_reason = match kind {
            ActionKind::Drain => {
                let r = reason.unwrap_or("").trim();
                // What a person types is bounded on its own, so that with the prefix of who
                // acted (a user name is at most 64 bytes) it always fits Slurm's reason.
                if r.chars().count() > MAX_TYPED_REASON_CHARS {
                    return Err(ActionError::Invalid(format!(
                        "reason: at most {MAX_TYPED_REASON_CHARS} characters"
                    )));
                }
                validate_reason(r).map_err(|e| ActionError::Invalid(e.to_string()))?;
                // Stored in Slurm prefixed with who acted.
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
                at_ms,
                user,
                role,
                kind,
                &slurm_reason,
                &plan.targets,
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

    /// No new actions from now on; waits up to `within` for those running to end (what
    /// does not end is reconciled at the next start).
    pub async fn close(&self, within: Duration) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Release);
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let busy = self
                .followed
                .lock()
                .is_ok_and(|f| f.by_id.values().any(|tx| !tx.borrow().finished()));
            if !busy {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!("actions still running at shutdown: reconciled at the next start");
    }

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
                targets: a.targets,
                recovered: true,
            };
            Arc::clone(self).execute(plan, tx).await?;
        }
        Ok(n)
    }

    /// Keeps `status` for followers; drops the oldest finished ones past the bound.
    fn follow(&self, status: ActionStatus) -> Arc<watch::Sender<ActionStatus>> {
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

    /// Runs a plan's targets in order; `Err` only when a recovered action's `calling` row
    /// cannot be settled yet (the scheduler cannot be read): it is tried again later.
    async fn execute(
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
            .act_and_verify(plan.kind, &t.target, &plan.reason, current.restarts)
            .await;
        self.finish_row(t, status, &message, true).await
    }

    /// A recovered `calling` row: the call may or may not have landed. Read the scheduler
    /// back (until the longest such a call could still take has passed) and record what
    /// it shows; never call again.
    async fn settle(
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
            let seen = self.read_back(plan.kind, &t.target, before).await;
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

    /// Asks for a poll now, here and (another replica may lead) on the leader.
    async fn poke(&self) {
        self.live.poke();
        if let Err(e) = self.store.notify_poke().await {
            tracing::debug!(error = %e, "leader not poked");
        }
    }

    /// A target as the scheduler shows it now, or `None` when it does not list it.
    async fn current(&self, kind: ActionKind, target: &str) -> Result<Option<Current>, SchedError> {
        if kind.on_nodes() {
            let nodes = self.sched.nodes().await?;
            Ok(nodes.iter().find(|n| n.name == target).map(|n| Current {
                done: match kind {
                    ActionKind::Drain => has_drain(n),
                    _ => is_resumed(n),
                },
                restarts: 0,
                state: n.raw_state.join("+"),
            }))
        } else {
            let id = target.parse::<u64>().unwrap_or(0);
            let jobs = self.sched.jobs().await?;
            Ok(jobs.iter().find(|j| j.job.id == id).map(|j| Current {
                done: j.job.state == JobState::Pending,
                restarts: j.restart_count,
                state: format!("{} (restarts {})", j.raw_state.join("+"), j.restart_count),
            }))
        }
    }

    /// Whether the scheduler shows `kind` done on `target` (for a requeue, a restart
    /// count past `restarts_before`), with the state it shows.
    async fn read_back(
        &self,
        kind: ActionKind,
        target: &str,
        restarts_before: u32,
    ) -> Result<Option<(bool, String)>, SchedError> {
        Ok(self.current(kind, target).await?.map(|c| {
            let done = if kind.on_nodes() {
                c.done
            } else {
                c.restarts > restarts_before
            };
            (done, c.state)
        }))
    }

    /// Calls the scheduler for `kind` on `target`, then reads it back until the end state
    /// shows or the deadline passes.
    async fn act_and_verify(
        &self,
        kind: ActionKind,
        target: &str,
        reason: &str,
        restarts_before: u32,
    ) -> (&'static str, String) {
        let job_id = target.parse::<u64>().unwrap_or(0);
        let called = match kind {
            ActionKind::Drain => self.sched.drain(target, reason).await,
            ActionKind::Resume => self.sched.resume(target).await,
            ActionKind::Requeue => self.sched.requeue(job_id, false).await,
            ActionKind::RequeueHold => self.sched.requeue(job_id, true).await,
        };
        if let Err(e) = called {
            return ("failed", e.to_string());
        }
        let deadline = tokio::time::Instant::now() + self.verify_within;
        loop {
            let seen = self.read_back(kind, target, restarts_before).await;
            let late = tokio::time::Instant::now() >= deadline;
            match seen {
                Ok(Some((true, state))) => return ("ok", format!("verified: {state}")),
                Ok(Some((false, state))) if late => {
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
                Err(e) if late => {
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

/// A target as the scheduler shows it.
struct Current {
    /// Already in the requested state (nothing to call).
    done: bool,
    /// A job's restart count (what a requeue's read-back compares against).
    restarts: u32,
    state: String,
}

/// Why unfinished actions cannot be reconciled yet (tried again later).
#[derive(Debug, thiserror::Error)]
enum RecoverError {
    #[error("the store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("the scheduler: {0}")]
    Scheduler(#[from] SchedError),
}
