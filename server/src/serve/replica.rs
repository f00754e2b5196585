//! Several replicas on one database: who leads, and how standbys see what the leader sees.
//!
//! Every replica runs [`run_lease`]: it takes the lease row when it is free or expired, and
//! renews it every quarter of its life while it holds it. The holder of a term is the
//! leader: only it polls the scheduler, scrapes, evaluates alerts, sends webhooks, runs the
//! auto-drain policy, reconciles orphaned actions and writes history (`serve.rs` starts
//! those tasks per term and stops them when the term ends, as soon as the database shows
//! another holder). A leader that cannot reach the database goes on: whatever its term
//! does that counts passes through the database first (history, alerts before their
//! webhooks, actions under the turn), so nothing of it lands while another term runs;
//! report deltas, the one write that adds up, are fenced by the term in their own
//! transaction, and the writer drops what is queued once the role has changed.
//!
//! A standby shows the leader's state: the leader publishes each tick (overview, the
//! scheduler's state, readings, targets) to `replica_ticks` while a standby has said it is
//! there, and `NOTIFY`s; [`follow`] wakes on the notification (or polls every interval) and
//! publishes the tick to its own browsers as if it were its own. Actions are taken on any
//! replica (see `actions.rs`); the replica that took one asks the leader to poll at once.
//!
//! On SQLite there is one process per file: the lease is taken at once and nothing is
//! published.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::live::Overview;
use app::model::{Inventory, UnixMs};
use tokio::sync::watch;

use crate::clock::wall_now_ms;
use crate::live::{Latest, Live, SchedSnapshot};
use crate::scheduler::{SchedJob, SchedNode};
pub use crate::store::Role;
use crate::store::{Dialect, Fence, Store, StoreError};
use crate::telemetry::Readings;

/// A name for this replica, unique among processes: host, process id and random bits.
pub fn holder_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    let mut b = [0u8; 4];
    let _ = getrandom::getrandom(&mut b);
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        u32::from_be_bytes(b)
    )
}

/// What the lease task shares: the role, and how many other replicas are standing by.
pub struct Lease {
    pub holder: String,
    pub ttl: Duration,
    pub role: watch::Sender<Role>,
    pub standbys: AtomicU64,
}

impl Lease {
    pub fn new(ttl: Duration) -> Arc<Lease> {
        Arc::new(Lease {
            holder: holder_id(),
            ttl,
            role: watch::Sender::new(Role::Starting),
            standbys: AtomicU64::new(0),
        })
    }

    /// The lease's life for a live interval: two intervals at most from a leader's death
    /// to a standby's first tick means the lease lives one interval (at least a second)
    /// and is renewed every quarter of it.
    pub fn ttl_for(interval_ms: u64) -> Duration {
        Duration::from_millis(interval_ms.max(1000))
    }

    fn set(&self, r: Role) {
        self.role.send_if_modified(|cur| {
            if *cur == r {
                false
            } else {
                *cur = r;
                true
            }
        });
    }
}

/// Takes and renews the lease until shutdown; `addr` is what standbys note of themselves.
pub async fn run_lease(
    store: Store,
    lease: Arc<Lease>,
    addr: String,
    mut shutdown: watch::Receiver<bool>,
) {
    if store.dialect() == Dialect::Sqlite {
        // One process per file (its lock): this one leads, until it stops.
        let mut wait = Duration::from_millis(200);
        loop {
            match store.lease_seize(&lease.holder).await {
                Ok(term) => {
                    lease.set(Role::Leader(Fence {
                        holder: lease.holder.clone(),
                        term,
                    }));
                    break;
                }
                // Without a term nothing could be fenced: nothing runs until it is taken.
                Err(e) => tracing::warn!(error = %e, "lease not taken yet; retrying"),
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
            wait = (wait * 2).min(Duration::from_secs(5));
        }
        let _ = shutdown.changed().await;
        return;
    }
    let ttl = lease.ttl;
    let renew = ttl / 4;
    // The term held.
    let mut held: Option<i64> = None;
    // Whether this replica may have a standby row: a leader removes it once, not at every
    // renewal.
    let mut listed = true;
    let mut failing = false;
    loop {
        let sent = Instant::now();
        let claim = tokio::time::timeout(
            renew,
            store.lease_claim(&lease.holder, held, ttl.as_millis() as i64, wall_now_ms()),
        )
        .await;
        match claim {
            Ok(Ok(Some(term))) => {
                if held != Some(term) {
                    tracing::info!(term, holder = %lease.holder, "this replica leads");
                    lease.set(Role::Leader(Fence {
                        holder: lease.holder.clone(),
                        term,
                    }));
                }
                held = Some(term);
                failing = false;
            }
            Ok(Ok(None)) => {
                if let Some(term) = held.take() {
                    tracing::warn!(term, "lease taken by another replica: standing by");
                }
                lease.set(Role::Standby);
                failing = false;
            }
            Ok(Err(_)) | Err(_) => {
                // The database cannot be reached: nobody can take the lease through it,
                // and everything this term does that counts (history, alerts, actions)
                // goes through it first, so the term's work goes on; it stops once the
                // database shows another holder.
                if !failing {
                    match &claim {
                        Ok(Err(e)) => tracing::warn!(error = %e, "lease cannot be renewed"),
                        _ => tracing::warn!("lease renewal timed out"),
                    }
                    failing = true;
                }
                if held.is_none() && *lease.role.borrow() == Role::Starting {
                    lease.set(Role::Standby);
                }
            }
        }
        let standby = held.is_none();
        // Bounded like the claim, so a slow database cannot stretch the renewal cadence. A
        // standby refreshes its row each time; a leader removes it once.
        let seen = tokio::time::timeout(renew, async {
            if standby || listed {
                store
                    .replica_note(&lease.holder, &addr, standby, wall_now_ms())
                    .await?;
                listed = standby;
            }
            store
                .replicas_seen(&lease.holder, 3 * ttl.as_millis() as i64, wall_now_ms())
                .await
        })
        .await;
        match seen {
            Ok(Ok(n)) => lease.standbys.store(n, Relaxed),
            Ok(Err(e)) => tracing::debug!(error = %e, "replica presence not noted"),
            Err(_) => tracing::debug!("replica presence not noted in time"),
        }
        let next = tokio::time::Instant::from_std(sent + renew);
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// One published tick as standbys receive it.
#[derive(serde::Serialize, serde::Deserialize)]
struct TickBody {
    overview: Overview,
    inventory: Option<Inventory>,
    sched: Option<SchedBody>,
    readings: Option<Readings>,
    targets: Vec<crate::telemetry::scrape::TargetHealth>,
    /// Newest complete checkpoint end of each running job.
    checkpoints: Vec<(u64, UnixMs)>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SchedBody {
    at_ms: UnixMs,
    polled_ms: UnixMs,
    interval_ms: i64,
    nodes: Vec<SchedNode>,
    jobs: Vec<SchedJob>,
    #[serde(default)]
    health: Option<crate::live::HealthPoll>,
}

/// Why a tick could not be carried to standbys.
#[derive(Debug, thiserror::Error)]
enum CarryError {
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("compression: {0}")]
    Io(#[from] std::io::Error),
}

fn encode(live: &Live, ov: &Overview) -> Result<Vec<u8>, CarryError> {
    use std::io::Write;
    let sched = live.sched();
    let running: Vec<u64> = sched
        .as_ref()
        .map(|s| {
            s.jobs
                .iter()
                .filter(|j| j.job.state == app::model::JobState::Running)
                .map(|j| j.job.id)
                .collect()
        })
        .unwrap_or_default();
    let checkpoints = live
        .last_checkpoints()
        .into_iter()
        .filter(|(j, _)| running.contains(j))
        .collect();
    let body = TickBody {
        overview: ov.clone(),
        inventory: live.inventory().map(|i| (*i).clone()),
        sched: sched.map(|s| SchedBody {
            at_ms: s.at_ms,
            polled_ms: s.polled_ms,
            interval_ms: s.interval_ms,
            nodes: s.nodes.clone(),
            jobs: s.jobs.clone(),
            health: s.health.as_deref().cloned(),
        }),
        readings: live.latest().map(|l| l.readings().clone()),
        targets: (*live.targets()).clone(),
        checkpoints,
    };
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    serde_json::to_writer(&mut z, &body)?;
    z.flush()?;
    Ok(z.finish()?)
}

/// Most bytes a tick may inflate to (a replica never trusts the database blindly either).
const MAX_TICK_BYTES: u64 = 512 << 20;

fn decode(body: &[u8]) -> Result<TickBody, CarryError> {
    use std::io::Read;
    let z = flate2::read::GzDecoder::new(body).take(MAX_TICK_BYTES);
    Ok(serde_json::from_reader(std::io::BufReader::new(z))?)
}

/// The leader's side: each published tick written for standbys while one is there, until
/// `stop` (the term's end) or the term is found taken.
pub async fn publish(
    store: Store,
    live: Arc<Live>,
    lease: Arc<Lease>,
    fence: Fence,
    mut stop: watch::Receiver<bool>,
) {
    if store.dialect() != Dialect::Postgres {
        return;
    }
    let mut ticks = live.subscribe();
    loop {
        let tick = tokio::select! {
            _ = stop.changed() => return,
            t = ticks.recv() => match t {
                Ok(t) => t,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            },
        };
        if lease.standbys.load(Relaxed) == 0 {
            continue;
        }
        let (l, ov) = (Arc::clone(&live), Arc::clone(&tick.overview));
        let body = match tokio::task::spawn_blocking(move || encode(&l, &ov)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "tick not carried to standbys");
                continue;
            }
            Err(_) => continue,
        };
        match store
            .replica_tick_put(&fence, tick.overview.published_ms, &body)
            .await
        {
            Ok(_) => {}
            Err(StoreError::Fenced(term)) => {
                tracing::warn!(term, "term over: ticks no longer published");
                return;
            }
            Err(e) => tracing::warn!(error = %e, "tick not carried to standbys"),
        }
    }
}

/// The standby's side: the leader's ticks published here, woken by `NOTIFY` on
/// PostgreSQL or every `interval`, until `stop`.
pub async fn follow(
    store: Store,
    live: Arc<Live>,
    database_url: String,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    if store.dialect() != Dialect::Postgres {
        return;
    }
    let mut listener = listen(&database_url, "gantry_tick").await;
    let mut last_id = 0i64;
    let mut last_term = 0i64;
    loop {
        let woken = async {
            match listener.as_mut() {
                Some(l) => l.recv().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.changed() => return,
            ok = woken => if !ok {
                // Lost: polling until it is back.
                listener = None;
            },
            _ = tokio::time::sleep(interval) => {
                if listener.is_none() {
                    listener = listen(&database_url, "gantry_tick").await;
                }
            }
        }
        let Ok(Some((id, term, body))) = store.replica_tick_after(last_id).await else {
            continue;
        };
        last_id = id;
        // A tick older than one already shown (a deposed leader's last) is not shown.
        if term < last_term {
            continue;
        }
        last_term = term;
        match tokio::task::spawn_blocking(move || decode(&body)).await {
            Ok(Ok(t)) => apply(&live, t),
            Ok(Err(e)) => tracing::warn!(error = %e, "leader's tick unreadable"),
            Err(_) => {}
        }
    }
}

async fn listen(url: &str, channel: &str) -> Option<sqlx::postgres::PgListener> {
    let mut l = sqlx::postgres::PgListener::connect(url).await.ok()?;
    l.listen(channel).await.ok()?;
    Some(l)
}

fn apply(live: &Live, t: TickBody) {
    if let Some(inv) = t.inventory {
        if live.inventory().is_none_or(|cur| *cur != inv) {
            live.set_inventory(Arc::new(inv));
        }
    }
    if let Some(s) = t.sched {
        live.set_sched(Arc::new(SchedSnapshot {
            at_ms: s.at_ms,
            polled_ms: s.polled_ms,
            interval_ms: s.interval_ms,
            nodes: s.nodes,
            jobs: s.jobs,
            health: s.health.map(Arc::new),
        }));
    }
    for (job, end) in t.checkpoints {
        live.checkpoint_seen(job, end);
    }
    live.set_targets(t.targets);
    live.set_alerts_firing(t.overview.summary.alerts_firing);
    live.set_alerts_critical(t.overview.summary.alerts_critical);
    if let Some(r) = t.readings {
        live.record_window(&r, &t.overview);
        live.set_latest(Latest::Owned(Arc::new(r)));
    }
    live.publish(t.overview, None);
}

/// The leader's side of pokes: another replica acted and asks for a poll now, or handed
/// over an action it cannot run itself (the simulator's standby).
pub async fn take_pokes(
    live: Arc<Live>,
    actions: Arc<crate::actions::Actions>,
    database_url: String,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let Some(mut l) = listen(&database_url, "gantry_poke").await else {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
            }
        };
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                n = l.recv() => match n {
                    Ok(_) => {
                        live.poke();
                        actions.wake();
                    }
                    Err(_) => break,
                },
            }
        }
    }
}
