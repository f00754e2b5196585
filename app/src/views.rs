//! Wire types of the node and job views. No I/O here.

use serde::{Deserialize, Serialize};

use crate::actions::Me;
use crate::live::NodeTile;
use crate::model::{Checkpoint, GpuReading, Job, JobState, NodeState, UnixMs};

/// One node as the scheduler last reported it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NodeRow {
    pub name: String,
    pub rack: String,
    pub state: NodeState,
    /// Slurm's own words (`MIXED+DRAIN`).
    pub raw_state: String,
    pub reason: Option<String>,
    pub gpus_total: Option<u32>,
    pub gpus_used: Option<u32>,
    pub jobs: Vec<u64>,
    /// Open incidents that hit it, and the worst one's severity.
    #[serde(default)]
    pub incidents: u32,
    #[serde(default)]
    pub worst_incident: Option<String>,
}

/// A pending or running job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobRow {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub gpus: u32,
    pub start_ms: Option<UnixMs>,
    pub restart_count: u32,
    pub reason: Option<String>,
    /// Its time limit (Slurm's `--time`), when it has one.
    #[serde(default)]
    pub time_limit_ms: Option<i64>,
    /// Why it waits (pending jobs only).
    #[serde(default)]
    pub wait: Option<crate::queue::Wait>,
    /// GPUs it holds idle (running jobs only).
    #[serde(default)]
    pub idle: Option<crate::queue::IdleHeld>,
}

/// The nodes page's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NodesView {
    pub me: Me,
    /// The source's time of the poll.
    pub at_ms: UnixMs,
    /// Wall-clock time of the poll, and the server's clock when this was sent.
    pub polled_ms: UnixMs,
    pub server_now_ms: UnixMs,
    /// How often the scheduler is polled; older than two of these is stale
    /// (`pages::nodes::stale_after`).
    pub interval_ms: i64,
    pub racks: Vec<String>,
    pub nodes: Vec<NodeRow>,
    pub jobs: Vec<JobRow>,
    /// The scheduler's own health (slurmctld's `sdiag`), where it reports one.
    #[serde(default)]
    pub health: Option<crate::queue::HealthView>,
    /// What was asked: which list, filtered and ordered how, which page. A view carries
    /// one list, a page of it: `nodes` for `/nodes`, `jobs` (and `idle`) for `/jobs`.
    #[serde(default)]
    pub query: ListQuery,
    /// Where the page's rows stand in their list.
    #[serde(default)]
    pub page: PageOf,
    /// Pending jobs by what they wait for, over every job (`/jobs`' filter).
    #[serde(default)]
    pub wait_counts: Vec<WaitCount>,
    /// Running jobs holding GPUs idle, longest first, at most a page of them, and how many
    /// there are (`/jobs`).
    #[serde(default)]
    pub idle: Vec<JobRow>,
    #[serde(default)]
    pub idle_total: u32,
    /// A fingerprint of the page's rows (nodes, jobs, idle, racks, wait counts and the
    /// page's place). When the asker already holds rows of this fingerprint, they are left
    /// out and `unchanged` is true: the asker keeps its own.
    #[serde(default)]
    pub rows_hash: u64,
    #[serde(default)]
    pub unchanged: bool,
}

/// The rows a page of `/nodes` or `/jobs` shows (its URL query): a list, filtered, ordered,
/// a page of [`LIST_PAGE`] rows of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ListQuery {
    /// Jobs (`/jobs`) rather than nodes (`/nodes`).
    pub jobs: bool,
    /// Nodes whose name, state or rack holds it, any case.
    pub filter: String,
    /// Nodes' order (`name`, `rack`, `state`, `gpus`, `problems`; others are `name`).
    pub sort: String,
    /// Jobs waiting for this (a [`crate::queue::WaitKind`]'s word); others are all jobs.
    pub wait: String,
    /// From 1; 0 is 1 and past the last page is the last.
    pub page: u32,
}

/// Rows per page of `/nodes` and `/jobs`: what one look takes in, and bounded whatever the
/// fleet's size (2,048 nodes' rows were 382 KB a refresh).
pub const LIST_PAGE: usize = 200;

/// Where a page's rows stand: rows `first + 1` to `first + shown` of `total` (those the
/// filter kept, of `all`), page `page` of `pages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct PageOf {
    pub first: u32,
    pub shown: u32,
    pub total: u32,
    pub all: u32,
    pub page: u32,
    pub pages: u32,
}

/// How many pending jobs wait for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct WaitCount {
    pub kind: crate::queue::WaitKind,
    pub jobs: u32,
}

/// An XID seen on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct XidSeen {
    pub gpu: u32,
    pub xid: u32,
    pub at_ms: UnixMs,
}

/// The node page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NodeDetail {
    pub me: Me,
    pub name: String,
    /// The live tile (power, hottest GPU, SM, throttling), when the node is in the layout.
    pub tile: Option<NodeTile>,
    /// The scheduler's view, as of its last poll.
    pub slurm: Option<NodeRow>,
    /// Each GPU's latest readings (empty values when the node is not reporting).
    pub gpus: Vec<GpuReading>,
    /// Its NVSwitches (HGX baseboards), where its exporter reports them, as HTML the
    /// server writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches_html: Option<String>,
    pub jobs: Vec<JobRow>,
    /// Newest first.
    pub xids: Vec<XidSeen>,
    /// Marked a lemon (RMA or deep diagnostics) in the last 30 days' reliability answer:
    /// the mark as HTML the server writes.
    pub lemon_html: Option<String>,
    /// Source time of the readings, and the wall clock of their publication and now.
    pub at_ms: UnixMs,
    pub published_ms: UnixMs,
    pub server_now_ms: UnixMs,
    pub interval_ms: i64,
    /// The open incidents that hit this node, critical first.
    #[serde(default)]
    pub incidents: Vec<Incident>,
}

/// One alert, for the alerts page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AlertItem {
    pub id: i64,
    pub rule: String,
    pub subject: String,
    pub severity: String,
    pub summary: String,
    pub link: String,
    /// `firing` or `resolved`.
    pub state: String,
    pub started_ms: UnixMs,
    pub resolved_ms: Option<UnixMs>,
    pub acked_by: Option<String>,
    pub acked_ms: Option<UnixMs>,
    pub ack_note: Option<String>,
    pub silenced_until_ms: Option<UnixMs>,
    /// Who silenced it last, and why.
    #[serde(default)]
    pub silenced_by: Option<String>,
    #[serde(default)]
    pub silence_note: Option<String>,
    /// Times its condition came back soon after it resolved (the same alert reopened).
    #[serde(default)]
    pub flaps: i64,
    /// Since when its condition is unknown for want of readings (it stays open).
    #[serde(default)]
    pub no_data_since_ms: Option<UnixMs>,
}

/// One failure and everything it causes: its cause's alert, the open alerts it holds
/// (grouped along the physical and logical tree), and what it hits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Incident {
    /// Its cause's alert id.
    pub id: i64,
    pub cause: AlertItem,
    /// The worst of its alerts: `critical`, `warning` or `info`.
    pub severity: String,
    /// When its first alert fired.
    pub started_ms: UnixMs,
    /// The cause is acknowledged.
    pub acked: bool,
    /// The alerts it holds besides its cause (inhibited: one incident, one notification).
    pub alerts: Vec<AlertItem>,
    /// The place it is about, in words (`node gpu038`, `rack B02`, `job 1042`).
    pub place: String,
    /// The page of that place.
    pub place_link: String,
    pub nodes: Vec<String>,
    pub racks: Vec<String>,
    /// Running jobs on its nodes, with their last checkpoint and the work at risk.
    pub jobs: Vec<IncidentJob>,
    /// What to do, in words.
    pub action: String,
    /// What a remediation policy did, would do or recommends for it (the newest decision).
    #[serde(default)]
    pub remedy: Option<crate::remediation::RemedyDecision>,
}

/// A running job an incident hits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct IncidentJob {
    pub id: u64,
    pub name: String,
    /// Its owner and account, as the scheduler names them.
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub account: String,
    pub gpus: u32,
    /// When its newest complete checkpoint finished, if any is known.
    pub last_checkpoint_ms: Option<UnixMs>,
    /// GPU-hours since its last checkpoint (or its start): lost if it fails now.
    pub at_risk_gpu_hours: f64,
}

/// `GET /api/incidents`: the open incidents, critical first, then newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct IncidentsView {
    pub incidents: Vec<Incident>,
}

/// `GET /api/incidents/{id}`: one incident and its timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct IncidentDetail {
    /// Its cause's alert id.
    pub id: i64,
    /// The incident as grouped now, while it is open; `None` once it closed.
    pub open: Option<Incident>,
    /// Its cause's alert (resolved once it closed).
    pub cause: AlertItem,
    /// What happened, oldest first: firings, acknowledgements, what policies decided,
    /// actions taken on it (operators and admins see those), its resolution.
    pub timeline: Vec<TimelineEntry>,
}

/// One moment of an incident.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct TimelineEntry {
    pub at_ms: UnixMs,
    /// What happened, in words.
    pub what: String,
    /// Where to read more, if anywhere.
    pub link: Option<String>,
}

/// The alerts page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AlertsView {
    pub me: Me,
    pub server_now_ms: UnixMs,
    /// Open incidents, critical first.
    #[serde(default)]
    pub incidents: Vec<Incident>,
    pub alerts: Vec<AlertItem>,
}

/// Filters and page of the job history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobFilter {
    pub state: Option<String>,
    pub user: Option<String>,
    pub account: Option<String>,
    pub partition: Option<String>,
    pub min_gpus: Option<u32>,
    /// Submitted at or after.
    pub since_ms: Option<UnixMs>,
    /// From 0.
    pub page: u32,
    pub per_page: u32,
}

/// One state transition of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobTransition {
    pub at_ms: UnixMs,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub detail: String,
}

/// The job page's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobDetail {
    pub me: Me,
    pub job: Job,
    pub restart_count: u32,
    pub reason: Option<String>,
    /// Why it waits, while pending.
    #[serde(default)]
    pub wait: Option<crate::queue::Wait>,
    /// GPUs it holds idle, while running.
    #[serde(default)]
    pub idle: Option<crate::queue::IdleHeld>,
    /// Its time limit, while the scheduler lists it.
    #[serde(default)]
    pub time_limit_ms: Option<i64>,
    /// Its state transitions and checkpoints, as HTML the server writes.
    pub history_html: String,
    /// The newest complete checkpoint, if any.
    pub last_good: Option<Checkpoint>,
    /// Running: GPU-hours since the last good checkpoint (or since the start).
    pub work_at_risk_gpu_hours: Option<f64>,
    /// GPU-hours lost to failures and requeues: from each run's last good checkpoint (or
    /// its start) to its end.
    pub lost_gpu_hours: f64,
    /// Its energy, cost of power and CO2 across its runs (from the report rollups).
    #[serde(default)]
    pub energy: Option<crate::reports::JobEnergy>,
    /// How often it should checkpoint, from its saves and the last 30 days' rates, and its
    /// stragglers and hang firing now (the radar's open alerts): HTML the server writes.
    pub advice_html: String,
    pub radar_html: String,
    /// Its effective training time and badput ledger across its runs (from the report
    /// rollups): HTML the server writes.
    pub ledger_html: String,
    /// The source's time now (simulated time with the simulator).
    pub now_ms: UnixMs,
}

/// Work lost when runs end, and work at risk now, from a job's runs and checkpoints.
/// `runs` are (start, end, ended badly) in time order; an open run has no end.
pub fn work_lost_and_at_risk(
    gpus: u32,
    runs: &[(UnixMs, Option<UnixMs>, bool)],
    checkpoints: &[Checkpoint],
    now_ms: UnixMs,
) -> (f64, Option<f64>) {
    let hours =
        |from: UnixMs, to: UnixMs| f64::from(gpus) * (to - from).max(0) as f64 / 3_600_000.0;
    let last_good_before = |start: UnixMs, end: UnixMs| {
        checkpoints
            .iter()
            .filter(|c| c.complete)
            .map(|c| c.started_ms + c.duration_ms)
            .filter(|&t| t >= start && t <= end)
            .max()
            .unwrap_or(start)
    };
    let mut lost = 0.0;
    let mut at_risk = None;
    for &(start, end, bad) in runs {
        match end {
            Some(e) if bad => lost += hours(last_good_before(start, e), e),
            Some(_) => {}
            None => at_risk = Some(hours(last_good_before(start, now_ms), now_ms)),
        }
    }
    (lost, at_risk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(start: UnixMs, dur: i64, complete: bool) -> Checkpoint {
        Checkpoint {
            job_id: 1,
            step: Some(0),
            path: String::new(),
            size_bytes: 0,
            started_ms: start,
            duration_ms: dur,
            complete,
        }
    }

    #[test]
    fn lost_work_and_work_at_risk() {
        const H: i64 = 3_600_000;
        // Run 1: 0..10 h, requeued; last good checkpoint ended at 8 h (a later one failed).
        // Run 2: from 12 h, running at 15 h; checkpointed at 14 h.
        let cks = [
            ck(8 * H - 60_000, 60_000, true),
            ck(9 * H, 60_000, false),
            ck(14 * H - 30_000, 30_000, true),
        ];
        let (lost, risk) = work_lost_and_at_risk(
            8,
            &[(0, Some(10 * H), true), (12 * H, None, false)],
            &cks,
            15 * H,
        );
        assert!((lost - 16.0).abs() < 1e-9, "2 h x 8 GPUs: {lost}");
        assert_eq!(risk, Some(8.0));
        // No checkpoint at all: everything since the start is at risk.
        let (_, risk) = work_lost_and_at_risk(4, &[(0, None, false)], &[], 2 * H);
        assert_eq!(risk, Some(8.0));
    }
}
