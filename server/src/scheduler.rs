//! One scheduler interface over every source: the Slurm CLI on a submit host, and the
//! simulator (so the embedded default can be acted on too). Reads come back normalized
//! ([`SlurmNode`], [`SlurmJob`]); actions are Slurm's (drain, resume, requeue).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use crate::slurm::cli::{Cli, CliError};
use crate::slurm::json::{SlurmJob, SlurmNode};

/// Why a scheduler call failed. The message is safe to show an operator: it is the
/// scheduler's own refusal or a plain description of what did not answer.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("{0}")]
    Cli(#[from] CliError),
    #[error("the scheduler refused: {0}")]
    Refused(String),
    #[error("the scheduler is not available: {0}")]
    Unavailable(String),
}

pub type SchedFuture<'a, T> = BoxFuture<'a, Result<T, SchedError>>;

/// What Gantry needs of a scheduler.
pub trait Scheduler: Send + Sync + 'static {
    fn nodes(&self) -> SchedFuture<'_, Vec<SlurmNode>>;
    fn jobs(&self) -> SchedFuture<'_, Vec<SlurmJob>>;
    /// Sets DRAIN with `reason` (stored verbatim).
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()>;
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()>;
    /// Requeues a running job, held if `hold`.
    fn requeue(&self, job: u64, hold: bool) -> SchedFuture<'_, ()>;
}

impl Scheduler for Cli {
    fn nodes(&self) -> SchedFuture<'_, Vec<SlurmNode>> {
        Box::pin(async move { Ok(Cli::nodes(self).await?) })
    }
    fn jobs(&self) -> SchedFuture<'_, Vec<SlurmJob>> {
        Box::pin(async move { Ok(Cli::jobs(self).await?) })
    }
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move { Ok(Cli::drain(self, node, reason).await?) })
    }
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move { Ok(Cli::resume(self, node).await?) })
    }
    fn requeue(&self, job: u64, hold: bool) -> SchedFuture<'_, ()> {
        Box::pin(async move { Ok(Cli::requeue(self, job, hold).await?) })
    }
}

/// A request to the simulator's task, which owns the simulator.
pub enum SimOp {
    Nodes(oneshot::Sender<Vec<SlurmNode>>),
    Jobs(oneshot::Sender<Vec<SlurmJob>>),
    Drain {
        node: String,
        reason: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Resume {
        node: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Requeue {
        job: u64,
        hold: bool,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// The simulator as a scheduler: every call is a message to the source task.
#[derive(Clone)]
pub struct SimScheduler {
    tx: mpsc::Sender<SimOp>,
}

impl SimScheduler {
    pub fn new() -> (SimScheduler, mpsc::Receiver<SimOp>) {
        let (tx, rx) = mpsc::channel(64);
        (SimScheduler { tx }, rx)
    }

    async fn ask<T>(&self, op: SimOp, rx: oneshot::Receiver<T>) -> Result<T, SchedError> {
        let gone = || SchedError::Unavailable("the simulator has stopped".into());
        self.tx.send(op).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    async fn act(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), String>>) -> SimOp,
    ) -> Result<(), SchedError> {
        let (reply, rx) = oneshot::channel();
        self.ask(make(reply), rx)
            .await?
            .map_err(SchedError::Refused)
    }
}

impl Scheduler for SimScheduler {
    fn nodes(&self) -> SchedFuture<'_, Vec<SlurmNode>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.ask(SimOp::Nodes(reply), rx).await
        })
    }
    fn jobs(&self) -> SchedFuture<'_, Vec<SlurmJob>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.ask(SimOp::Jobs(reply), rx).await
        })
    }
    fn drain<'a>(&'a self, node: &'a str, reason: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            crate::slurm::cli::validate_node_name(node)?;
            crate::slurm::cli::validate_reason(reason)?;
            self.act(|reply| SimOp::Drain {
                node: node.into(),
                reason: reason.into(),
                reply,
            })
            .await
        })
    }
    fn resume<'a>(&'a self, node: &'a str) -> SchedFuture<'a, ()> {
        Box::pin(async move {
            crate::slurm::cli::validate_node_name(node)?;
            self.act(|reply| SimOp::Resume {
                node: node.into(),
                reply,
            })
            .await
        })
    }
    fn requeue(&self, job: u64, hold: bool) -> SchedFuture<'_, ()> {
        Box::pin(async move { self.act(|reply| SimOp::Requeue { job, hold, reply }).await })
    }
}

/// Answers one request against the simulator (called by its task, between ticks).
pub fn serve_sim_op(sim: &mut crate::sim::Sim, op: SimOp) {
    // A dropped reply means the caller gave up; nothing to do.
    match op {
        SimOp::Nodes(reply) => drop(reply.send(sim.slurm_nodes())),
        SimOp::Jobs(reply) => drop(reply.send(sim.slurm_jobs())),
        SimOp::Drain {
            node,
            reason,
            reply,
        } => drop(reply.send(sim.drain_node(&node, &reason))),
        SimOp::Resume { node, reply } => drop(reply.send(sim.resume_node(&node))),
        SimOp::Requeue { job, hold, reply } => drop(reply.send(sim.requeue_job(job, hold))),
    }
}

pub type SharedScheduler = Arc<dyn Scheduler>;
