//! The store queue: history writes from the live path to one writer task, never blocking
//! the caller. What the bounded queue cannot take is counted and logged, not hidden.

use std::sync::Arc;

use app::model::{Checkpoint, Inventory, Job, UnixMs};
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::store::{Rollup, Rollup1h, Store};

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
    Rollup(Rollup),
    Rollup1h(Rollup1h),
    /// Additions to hourly report rollups (one transaction).
    Report(Vec<crate::store::ReportDelta>),
    NodeState {
        node: String,
        at_ms: UnixMs,
        state: app::model::NodeState,
        reason: String,
    },
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
            let n = self
                .metrics
                .store_queue_dropped_total
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

/// Starts the store writer; it ends when every queue handle is dropped.
pub fn spawn_store_writer(
    store: Store,
    metrics: Arc<Metrics>,
) -> (StoreQueue, tokio::task::JoinHandle<()>) {
    // Room for a start-up burst at 2,048 nodes: the first tick records every node's state
    // and the simulator's day of history at once (with 8,192 slots, over 1,000 writes were
    // dropped there).
    let (tx, mut rx) = mpsc::channel::<StoreWrite>(65_536);
    let m = Arc::clone(&metrics);
    let handle = tokio::spawn(async move {
        while let Some(w) = rx.recv().await {
            let what = match &w {
                StoreWrite::Inventory(_) => "inventory",
                StoreWrite::Job { .. } => "job",
                StoreWrite::Checkpoint(_) => "checkpoint",
                StoreWrite::Xid { .. } => "xid",
                StoreWrite::Rollup(_) => "rollup",
                StoreWrite::Rollup1h(_) => "hourly rollup",
                StoreWrite::Report(_) => "report rollup",
                StoreWrite::NodeState { .. } => "node state",
            };
            let res = match w {
                StoreWrite::Inventory(inv) => store.put_inventory(&inv).await,
                StoreWrite::Job { job, at_ms, detail } => {
                    store.record_job(&job, at_ms, &detail).await
                }
                StoreWrite::Checkpoint(c) => store.put_checkpoint(&c).await,
                StoreWrite::Xid {
                    node,
                    gpu,
                    xid,
                    at_ms,
                } => store.put_xid(&node, gpu, xid, at_ms).await,
                StoreWrite::Rollup(r) => store.put_rollup(&r).await,
                StoreWrite::Rollup1h(r) => store.put_rollup_1h(&r).await,
                StoreWrite::Report(d) => store.add_report_deltas(&d).await,
                StoreWrite::NodeState {
                    node,
                    at_ms,
                    state,
                    reason,
                } => store.put_node_event(&node, at_ms, state, &reason).await,
            };
            match res {
                Ok(()) => {
                    m.store_writes_total
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => {
                    m.store_errors_total
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::error!(write = what, error = %e, "store write failed");
                }
            }
        }
    });
    (StoreQueue { tx, metrics }, handle)
}
