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

//!
//! The files: `planning.rs` (targets resolved, the preview, an action recorded and
//! started), `running.rs` (one action's targets in order under the turn), `verify.rs` (what
//! the scheduler shows of a target, the call and its read-back), `recovery.rs` (what a
//! stopped server or a dead replica left unfinished) and `following.rs` (an action's status
//! for whoever waits on it).

mod following;
mod planning;
mod recovery;
mod running;
mod verify;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::actions::{ActionKind, ActionStatus};
use app::model::UnixMs;
use tokio::sync::watch;

use crate::auth::RateLimiter;
use crate::clock::wall_now_ms;
use crate::live::Live;
use crate::scheduler::{SchedError, SharedScheduler, MAX_REASON_BYTES};
use crate::store::{Store, StoredTarget};

/// The longest drain reason a person may type, in characters: with `user: ` before it
/// (names are at most 64 bytes) it stays within [`MAX_REASON_BYTES`] however wide its
/// characters (4 bytes at most each).
pub const MAX_TYPED_REASON_CHARS: usize = 900;
const _: () = assert!(4 * MAX_TYPED_REASON_CHARS + 64 + 2 <= MAX_REASON_BYTES);

/// Most targets in one request (a large rack or domain).
const MAX_TARGETS: usize = 512;

/// Most nodes a requeue keeps its jobs off.
const MAX_EXCLUDED: usize = 64;

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
    /// A requeue's nodes its jobs must not run on again.
    exclude: Vec<String>,
    targets: Vec<StoredTarget>,
    /// Found unfinished at start-up (its `calling` rows are settled by reading back).
    recovered: bool,
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

    /// Asks for a poll now, here and (another replica may lead) on the leader.
    async fn poke(&self) {
        self.live.poke();
        if let Err(e) = self.store.notify_poke().await {
            tracing::debug!(error = %e, "leader not poked");
        }
    }
}

/// Why unfinished actions cannot be reconciled yet (tried again later).
#[derive(Debug, thiserror::Error)]
enum RecoverError {
    #[error("the store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("the scheduler: {0}")]
    Scheduler(#[from] SchedError),
}
