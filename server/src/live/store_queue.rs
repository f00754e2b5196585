//! The store queue: history writes from the live path to one writer task, never blocking
//! the caller. What the bounded queue cannot take is counted and logged, not hidden.
//!
//! The writer writes in order. A write that fails for a reason that may pass (the database
//! busy, locked, full or unreachable) is tried again, with a growing wait, before any later
//! write; meanwhile writes wait in the queue, and what arrives when it is full is dropped
//! and counted. A write retrying cannot fix (a broken constraint) is dropped and counted
//! once. Writes may be applied twice (a commit whose answer was lost is retried), so each
//! is an upsert or idempotent, except report deltas, which add.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use app::model::{Checkpoint, Inventory, Job, UnixMs};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::store::{Fence, Role, Rollup, Rollup1h, Store};

/// Room for a start-up burst at 2,048 nodes: the first tick records every node's state and
/// the simulator's day of history at once (with 8,192 slots, over 1,000 writes were
/// dropped there).
const CAPACITY: usize = 65_536;
/// The wait before a failed write is tried again; it doubles after each try, up to
/// [`RETRY_WAIT_MAX`].
const RETRY_WAIT_FIRST: Duration = Duration::from_millis(100);
const RETRY_WAIT_MAX: Duration = Duration::from_secs(5);
/// How long the writer keeps retrying once every queue handle is gone (shutdown); then the
/// write and what is queued behind it are abandoned, so a dead database cannot hold
/// shutdown forever.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What the store writer is asked to do.
#[derive(Debug)]
pub enum StoreWrite {
    Inventory(Box<Inventory>),
    Job {
        job: Box<Job>,
        at_ms: UnixMs,
        detail: String,
    },
    Checkpoint(Checkpoint),
    Xid {
        node: String,
        gpu: u32,
        xid: u32,
        at_ms: UnixMs,
    },
    /// A hardware counter's step in the readings (`kind`: `ecc_dbe`, `ib_link_down`); `gpu`
    /// is `None` for the node's own.
    Evidence {
        node: String,
        gpu: Option<u32>,
        kind: &'static str,
        at_ms: UnixMs,
        amount: u64,
    },
    Rollup(Rollup),
    Rollup1h(Rollup1h),
    /// Additions to hourly report rollups (one transaction), holding every frame through
    /// `through_ms` (source time): with a fence, written with the deltas.
    Report {
        deltas: Vec<crate::store::ReportDelta>,
        through_ms: UnixMs,
    },
    NodeState {
        node: String,
        at_ms: UnixMs,
        state: app::model::NodeState,
        reason: String,
    },
    /// A job's start with the estimates Slurm gave it while it waited.
    StartEstimate(crate::store::StartEstimate),
}

/// The sending half of the store queue; never blocks the caller.
#[derive(Clone)]
pub struct StoreQueue {
    tx: mpsc::Sender<StoreWrite>,
    metrics: Arc<Metrics>,
}

impl StoreQueue {
    pub fn send(&self, w: StoreWrite) {
        if self.tx.try_send(w).is_err() {
            let n = self.metrics.store_queue_dropped_total.fetch_add(1, Relaxed);
            // Log the first drop and then every 1000th, so a stuck database cannot flood the log.
            if n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped_total = n + 1,
                    "store queue full: history write dropped"
                );
            }
        }
    }
}

impl StoreWrite {
    fn what(&self) -> &'static str {
        match self {
            StoreWrite::Inventory(_) => "inventory",
            StoreWrite::Job { .. } => "job",
            StoreWrite::Checkpoint(_) => "checkpoint",
            StoreWrite::Xid { .. } => "xid",
            StoreWrite::Evidence { .. } => "evidence",
            StoreWrite::Rollup(_) => "rollup",
            StoreWrite::Rollup1h(_) => "hourly rollup",
            StoreWrite::Report { .. } => "report rollup",
            StoreWrite::NodeState { .. } => "node state",
            StoreWrite::StartEstimate(_) => "start estimate",
        }
    }

    /// Writes this at once, around the queue (for replaying history in tests and tools).
    pub async fn write_to(&self, store: &Store) -> crate::store::Result<()> {
        self.apply(store, None).await
    }

    async fn apply(&self, store: &Store, fence: Option<&Fence>) -> crate::store::Result<()> {
        match self {
            StoreWrite::Inventory(inv) => store.put_inventory(inv).await,
            StoreWrite::Job { job, at_ms, detail } => store.record_job(job, *at_ms, detail).await,
            StoreWrite::Checkpoint(c) => store.put_checkpoint(c).await,
            StoreWrite::Xid {
                node,
                gpu,
                xid,
                at_ms,
            } => store.put_xid(node, *gpu, *xid, *at_ms).await,
            StoreWrite::Evidence {
                node,
                gpu,
                kind,
                at_ms,
                amount,
            } => store.put_evidence(node, *gpu, kind, *at_ms, *amount).await,
            StoreWrite::Rollup(r) => store.put_rollup(r).await,
            StoreWrite::Rollup1h(r) => store.put_rollup_1h(r).await,
            StoreWrite::Report { deltas, through_ms } => match fence {
                Some(f) => store.add_report_deltas_fenced(deltas, f, *through_ms).await,
                None => store.add_report_deltas(deltas).await,
            },
            StoreWrite::NodeState {
                node,
                at_ms,
                state,
                reason,
            } => store.put_node_event(node, *at_ms, *state, reason).await,
            StoreWrite::StartEstimate(e) => store.put_start_estimate(e).await,
        }
    }
}

/// Starts the store writer; it ends when every queue handle is dropped and what was queued
/// is written (or abandoned, [`SHUTDOWN_GRACE`] after that, if the database still fails).
pub fn spawn_store_writer(
    store: Store,
    metrics: Arc<Metrics>,
) -> (StoreQueue, tokio::task::JoinHandle<()>) {
    spawn_with(store, metrics, CAPACITY, SHUTDOWN_GRACE, None)
}

/// As [`spawn_store_writer`], for the leader of one term: while `role` shows another (the
/// term has ended), writes are dropped and counted, and report deltas are fenced by the
/// term in their own transaction.
pub fn spawn_store_writer_fenced(
    store: Store,
    metrics: Arc<Metrics>,
    fence: Fence,
    role: watch::Receiver<Role>,
) -> (StoreQueue, tokio::task::JoinHandle<()>) {
    spawn_with(
        store,
        metrics,
        CAPACITY,
        SHUTDOWN_GRACE,
        Some((fence, role)),
    )
}

fn spawn_with(
    store: Store,
    metrics: Arc<Metrics>,
    capacity: usize,
    grace: Duration,
    term: Option<(Fence, watch::Receiver<Role>)>,
) -> (StoreQueue, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<StoreWrite>(capacity);
    let writer = Writer {
        store,
        metrics: Arc::clone(&metrics),
        rx,
        grace,
        closed_since: None,
        term,
    };
    (StoreQueue { tx, metrics }, tokio::spawn(writer.run()))
}

struct Writer {
    store: Store,
    metrics: Arc<Metrics>,
    rx: mpsc::Receiver<StoreWrite>,
    grace: Duration,
    /// When the writer first saw every queue handle gone.
    closed_since: Option<Instant>,
    /// The leader term this writer writes for, and the replica's role.
    term: Option<(Fence, watch::Receiver<Role>)>,
}

/// A write given up on at shutdown, the database still failing.
struct Abandoned;

impl Writer {
    async fn run(mut self) {
        while let Some(w) = self.rx.recv().await {
            // Starts the shutdown clock as soon as the queue is seen closed.
            self.closed_for();
            if self.write(&w).await.is_err() {
                let abandoned = 1 + self.rx.len() as u64;
                self.metrics
                    .store_queue_dropped_total
                    .fetch_add(abandoned, Relaxed);
                return;
            }
        }
    }

    /// How long ago the writer first saw every queue handle gone; `None` while one is left.
    fn closed_for(&mut self) -> Option<Duration> {
        if self.closed_since.is_none() && self.rx.is_closed() {
            self.closed_since = Some(Instant::now());
        }
        self.closed_since.map(|t| t.elapsed())
    }

    /// Writes `w`, trying again while the failure may pass; drops it (counted, logged) when
    /// it cannot. An outage is logged when it starts and when it ends, not per try.
    async fn write(&mut self, w: &StoreWrite) -> Result<(), Abandoned> {
        let m = Arc::clone(&self.metrics);
        let mut wait = RETRY_WAIT_FIRST;
        // When the first try failed, and the tries since.
        let mut outage: Option<(Instant, u64)> = None;
        loop {
            if let Some((f, role)) = &self.term {
                if role.borrow().fence() != Some(f) {
                    let n = m.store_writes_fenced_total.fetch_add(1, Relaxed);
                    if n == 0 {
                        tracing::warn!(
                            term = f.term,
                            "leader term over: its queued history is not written"
                        );
                    }
                    return Ok(());
                }
            }
            let fence = self.term.as_ref().map(|(f, _)| f);
            let e = match w.apply(&self.store, fence).await {
                Ok(()) => {
                    m.store_writes_total.fetch_add(1, Relaxed);
                    if let Some((since, retries)) = outage {
                        tracing::info!(
                            write = w.what(),
                            after_ms = since.elapsed().as_millis() as u64,
                            retries,
                            "store writes again"
                        );
                    }
                    return Ok(());
                }
                Err(e) => e,
            };
            m.store_errors_total.fetch_add(1, Relaxed);
            if !e.may_pass() {
                m.store_writes_failed_total.fetch_add(1, Relaxed);
                tracing::error!(write = w.what(), error = %e, "store write failed: dropped");
                return Ok(());
            }
            let (since, retries) = outage.get_or_insert_with(|| {
                tracing::warn!(
                    write = w.what(),
                    error = %e,
                    "store write failed: retrying it, later writes wait in the queue"
                );
                (Instant::now(), 0)
            });
            if self.closed_for().is_some_and(|d| d >= self.grace) {
                tracing::error!(
                    write = w.what(),
                    error = %e,
                    after_ms = since.elapsed().as_millis() as u64,
                    retries = *retries,
                    abandoned = 1 + self.rx.len() as u64,
                    "store still failing at shutdown: the write and those queued behind it abandoned"
                );
                return Err(Abandoned);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_WAIT_MAX);
            *retries += 1;
            m.store_write_retries_total.fetch_add(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::NodeState;
    use sqlx::{Connection, SqliteConnection};

    const T0: UnixMs = 1_795_968_000_000;
    /// Longer than SQLite's busy timeout (sqlx's default, 5 s), so a write that meets the
    /// lock fails rather than waits it out.
    const LOCKED_FOR: Duration = Duration::from_secs(6);

    async fn sqlite(test: &str) -> (String, Store) {
        let dir = std::env::temp_dir().join(format!("gantry-queue-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite://{}", dir.join("gantry.db").display());
        let store = Store::connect(&url).await.expect("store");
        (url, store)
    }

    /// A second connection holding SQLite's write lock until `COMMIT`.
    async fn lock(url: &str) -> SqliteConnection {
        let mut c = SqliteConnection::connect(url)
            .await
            .expect("second connection");
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut c)
            .await
            .expect("lock");
        c
    }

    async fn unlock(c: &mut SqliteConnection) {
        sqlx::query("COMMIT").execute(c).await.expect("unlock");
    }

    fn event(i: i64) -> StoreWrite {
        StoreWrite::NodeState {
            node: "gpu001".into(),
            at_ms: T0 + i,
            state: NodeState::Down,
            reason: format!("write {i}"),
        }
    }

    /// The node events stored, in the order they were inserted (SQLite's rowid).
    async fn stored(c: &mut SqliteConnection) -> Vec<i64> {
        sqlx::query_scalar::<_, i64>("SELECT at_ms FROM node_events ORDER BY rowid")
            .fetch_all(c)
            .await
            .expect("read back")
            .into_iter()
            .map(|at| at - T0)
            .collect()
    }

    fn count(c: &std::sync::atomic::AtomicU64) -> u64 {
        c.load(Relaxed)
    }

    #[tokio::test]
    async fn writes_wait_out_a_locked_database_in_order() {
        let (url, store) = sqlite("locked").await;
        let mut held = lock(&url).await;
        let m = Arc::new(Metrics::default());
        let (q, writer) = spawn_with(store, Arc::clone(&m), 64, SHUTDOWN_GRACE, None);
        for i in 0..10 {
            q.send(event(i));
        }
        tokio::time::sleep(LOCKED_FOR).await;
        unlock(&mut held).await;
        drop(q);
        writer.await.expect("writer ends when the queue closes");
        assert_eq!(stored(&mut held).await, (0..10).collect::<Vec<_>>());
        assert!(count(&m.store_write_retries_total) >= 1);
        assert!(count(&m.store_errors_total) >= 1);
        assert_eq!(count(&m.store_writes_total), 10);
        assert_eq!(count(&m.store_queue_dropped_total), 0);
        assert_eq!(count(&m.store_writes_failed_total), 0);
    }

    #[tokio::test]
    async fn writes_past_the_bound_are_dropped_and_counted() {
        let (url, store) = sqlite("bound").await;
        let mut held = lock(&url).await;
        let m = Arc::new(Metrics::default());
        let (q, writer) = spawn_with(store, Arc::clone(&m), 2, SHUTDOWN_GRACE, None);
        q.send(event(0));
        // The writer takes write 0 and meets the lock; 1 and 2 fill the queue.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for i in 1..10 {
            q.send(event(i));
        }
        tokio::time::sleep(LOCKED_FOR).await;
        unlock(&mut held).await;
        drop(q);
        writer.await.expect("writer ends when the queue closes");
        assert_eq!(stored(&mut held).await, vec![0, 1, 2]);
        assert_eq!(count(&m.store_queue_dropped_total), 7);
        assert!(count(&m.store_write_retries_total) >= 1);
        assert_eq!(count(&m.store_writes_total), 3);
    }

    #[tokio::test]
    async fn a_write_retrying_cannot_fix_is_dropped_once() {
        let (url, store) = sqlite("constraint").await;
        let m = Arc::new(Metrics::default());
        let (q, writer) = spawn_with(store, Arc::clone(&m), 64, SHUTDOWN_GRACE, None);
        // Two nodes of one name break the nodes' primary key.
        let mut inv = crate::sim::layout(2, "t");
        inv.nodes.push(inv.nodes[0].clone());
        q.send(StoreWrite::Inventory(Box::new(inv)));
        q.send(event(0));
        drop(q);
        writer.await.expect("writer ends when the queue closes");
        let mut c = SqliteConnection::connect(&url).await.expect("connection");
        assert_eq!(stored(&mut c).await, vec![0]);
        assert_eq!(count(&m.store_writes_failed_total), 1);
        assert_eq!(count(&m.store_errors_total), 1);
        assert_eq!(count(&m.store_write_retries_total), 0);
        assert_eq!(count(&m.store_writes_total), 1);
    }

    #[tokio::test]
    async fn shutdown_abandons_writes_the_database_still_refuses() {
        let (url, store) = sqlite("shutdown").await;
        let mut held = lock(&url).await;
        let m = Arc::new(Metrics::default());
        let (q, writer) = spawn_with(store, Arc::clone(&m), 64, Duration::from_secs(1), None);
        for i in 0..3 {
            q.send(event(i));
        }
        drop(q);
        tokio::time::timeout(Duration::from_secs(20), writer)
            .await
            .expect("writer gives up")
            .expect("writer ends");
        unlock(&mut held).await;
        assert_eq!(stored(&mut held).await, Vec::<i64>::new());
        assert_eq!(count(&m.store_queue_dropped_total), 3);
        assert_eq!(count(&m.store_writes_total), 0);
    }
}
