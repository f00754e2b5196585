//! Reliability: job interruptions and their causes, and the rates behind them (server and
//! browser). The server attributes each interruption from the evidence it stored
//! (`server::reliability`); nothing here does I/O.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;
use crate::reports::ReportQuery;

/// What ended a job's run before its time, as far as the evidence tells.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A GPU failed (fell off the bus, its system processor stopped, an engine halted).
    Gpu,
    /// GPU memory: uncorrectable ECC errors, row remapping failures.
    GpuMemory,
    NvLink,
    /// An InfiniBand port went down under the job.
    Network,
    /// The node stopped answering or the scheduler ended the job as NODE_FAIL.
    Host,
    /// The job's processes were killed by a signal (an NCCL watchdog aborts with SIGABRT).
    Software,
    /// The job's own error: a non-zero exit code, or an XID the application causes.
    UserApplication,
    /// Ended on purpose: requeued by an operator, preempted.
    Planned,
    /// No evidence: an honest answer.
    #[default]
    Unknown,
}

impl Cause {
    pub const ALL: [Cause; 9] = [
        Cause::Gpu,
        Cause::GpuMemory,
        Cause::NvLink,
        Cause::Network,
        Cause::Host,
        Cause::Software,
        Cause::UserApplication,
        Cause::Planned,
        Cause::Unknown,
    ];

    /// The name in URLs, CSV files and `/sim/truth`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Gpu => "gpu",
            Cause::GpuMemory => "gpu_memory",
            Cause::NvLink => "nvlink",
            Cause::Network => "network",
            Cause::Host => "host",
            Cause::Software => "software",
            Cause::UserApplication => "user_application",
            Cause::Planned => "planned",
            Cause::Unknown => "unknown",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Cause::Gpu => "GPU",
            Cause::GpuMemory => "GPU memory (HBM)",
            Cause::NvLink => "NVLink",
            Cause::Network => "Network (InfiniBand)",
            Cause::Host => "Host / node",
            Cause::Software => "Software / NCCL",
            Cause::UserApplication => "User application",
            Cause::Planned => "Planned (operator, preemption)",
            Cause::Unknown => "Unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the hardware or the platform failed (not the job itself, not on purpose).
    pub fn is_unexpected(self) -> bool {
        !matches!(self, Cause::UserApplication | Cause::Planned)
    }

    /// A fault of the machine the job ran on (its GPUs, memory, links, network or host),
    /// which counts against that node.
    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            Cause::Gpu | Cause::GpuMemory | Cause::NvLink | Cause::Network | Cause::Host
        )
    }
}

/// One interruption with its attributed cause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Interruption {
    pub job_id: u64,
    pub job_name: String,
    pub account: String,
    pub user: String,
    /// When the run ended.
    pub at_ms: UnixMs,
    /// When the run that ended had started (`None` when the history lacks its start).
    pub run_start_ms: Option<UnixMs>,
    pub gpus: u32,
    /// How the scheduler ended it: failed, node_fail, requeued, preempted.
    pub state: String,
    pub cause: Cause,
    /// The node the evidence points at, if any.
    pub node: Option<String>,
    pub rack: Option<String>,
    pub gpu_model: Option<String>,
    /// The evidence, in words ("XID 79 on gpu017 GPU 3: GPU has fallen off the bus").
    pub evidence: String,
}

/// Interruptions of one cause in a group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct CauseCount {
    pub cause: Cause,
    pub count: u32,
    /// Of all interruptions in the table's scope, 0.0 to 1.0.
    pub share: f64,
}

/// A row of a "by something" table: the group and its interruptions by cause.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct GroupCauses {
    pub group: String,
    pub total: u32,
    /// Counts in the order of [`Cause::ALL`].
    pub counts: Vec<u32>,
}

/// Mean time between interruptions for jobs of one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SizeRate {
    /// Jobs of `gpus_from..=gpus_to` GPUs.
    pub gpus_from: u32,
    pub gpus_to: u32,
    /// Runs of such jobs that ran in the period, and the wall hours they ran in it.
    pub runs: u32,
    pub run_hours: f64,
    pub gpu_hours: f64,
    pub interruptions: u32,
    /// Run hours per interruption; `None` without one.
    pub mtbi_hours: Option<f64>,
}

/// Time out of service of one node in the period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct NodeRepair {
    pub node: String,
    /// Times it went out of service (down, drained, not responding) and came back.
    pub repairs: u32,
    pub out_of_service_hours: f64,
    /// Mean time to repair; `None` while it never came back in the period.
    pub mttr_hours: Option<f64>,
}

/// A node's case for being a lemon over the period: what it did, its score, and whether
/// it is marked for RMA or deep diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Lemon {
    pub node: String,
    pub rack: Option<String>,
    /// [`LemonWeights`] applied to the counts below, over the period.
    pub score: f64,
    /// Interruptions with a hardware or platform cause that the evidence put on this node:
    /// the jobs it took down.
    pub jobs_taken_down: u32,
    /// XIDs of the GPU, GPU memory or NVLink classes.
    pub hardware_xids: u32,
    /// Steps of the double-bit ECC or InfiniBand link-downed counters.
    pub counter_steps: u32,
    /// Times it went out of service (drained, down, not responding).
    pub outages: u32,
    pub out_of_service_hours: f64,
    /// Marked for RMA or deep diagnostics at the period's end (or now).
    pub rma: bool,
    /// The score over the last [`LEMON_WINDOW_DAYS`] days at the period's end, which the
    /// mark follows.
    pub recent_score: f64,
    /// In words: "7 jobs taken down; XID 48 x7; 1 outage".
    pub evidence: String,
}

/// How much each kind of trouble weighs in a lemon's score.
pub struct LemonWeights;

impl LemonWeights {
    pub const JOB_TAKEN_DOWN: f64 = 3.0;
    pub const HARDWARE_XID: f64 = 1.0;
    pub const COUNTER_STEP: f64 = 1.0;
    pub const OUTAGE: f64 = 2.0;
    /// Per day out of service.
    pub const DAY_OUT: f64 = 1.0;
}

/// The mark for RMA follows the score over this many trailing days ...
pub const LEMON_WINDOW_DAYS: i64 = 7;
/// ... set when it reaches this (about three jobs taken down with their evidence in a
/// week; a healthy node at Llama 3's rates scores under 3) ...
pub const LEMON_RMA_AT: f64 = 12.0;
/// ... and cleared only once it falls below this (hysteresis: a lemon that had a quiet
/// day stays marked).
pub const LEMON_RMA_CLEAR: f64 = 6.0;

/// `/reliability`: interruptions by cause and the rates, for a period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Reliability {
    pub query: ReportQuery,
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
    pub now_ms: UnixMs,
    /// Every cause, in the order of [`Cause::ALL`], with its count and share.
    pub by_cause: Vec<CauseCount>,
    /// Of the unexpected ones (hardware and platform), their count.
    pub unexpected: u32,
    /// By the query's grouping (account, partition, user, rack or switch domain).
    pub by_group: Vec<GroupCauses>,
    pub by_gpu_model: Vec<GroupCauses>,
    /// Nodes the evidence pointed at, most interruptions first.
    pub by_node: Vec<GroupCauses>,
    pub by_size: Vec<SizeRate>,
    /// GPU-hours of job runs in the period per interruption, times 1,000: the mean time
    /// between interruptions of a job of 1,000 GPUs, in hours; `None` without one.
    pub mtbi_hours_per_1000_gpus: Option<f64>,
    pub run_gpu_hours: f64,
    pub repairs: Vec<NodeRepair>,
    /// Nodes with any trouble, highest score first.
    pub lemons: Vec<Lemon>,
    /// Stragglers and hung jobs firing now, whatever the period (the radar's open alerts).
    pub radar: Vec<crate::views::AlertItem>,
    /// The newest interruptions first, at most [`MAX_LISTED`].
    pub interruptions: Vec<Interruption>,
    /// How many there were in all (the list may be cut).
    pub total: u32,
    /// Where the allocated time went: effective training time and the badput ledger.
    pub ledger: Ledger,
    /// The ledger's charts as SVG for the page, drawn on the server (text in the page's
    /// colour, so they read in the dark theme and print in the light one). Not part of the
    /// API's answer: `GET /api/reliability/charts/…` serves them.
    #[serde(skip)]
    #[cfg_attr(feature = "ssr", schema(ignore))]
    pub charts: Vec<crate::reports::ReportChart>,
    /// What of the period has data (Gantry books only what it watched).
    #[serde(default)]
    pub coverage: crate::reports::Coverage,
}

/// Allocated GPU-hours by what they did (the server's `reports::ledger` defines each).
/// Every bucket but `restart_wait_gh` is a part of `allocated_gh`, and they add up to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Badput {
    pub allocated_gh: f64,
    pub productive_gh: f64,
    pub startup_gh: f64,
    pub checkpoint_gh: f64,
    pub reexec_gh: f64,
    pub throttle_gh: f64,
    pub idle_gh: f64,
    pub hung_gh: f64,
    /// No reading of the GPUs (nothing can be said of them).
    pub other_gh: f64,
    /// Outside the allocation: from an interruption until the job ran again.
    pub restart_wait_gh: f64,
}

impl Badput {
    /// Effective training time ratio: productive over allocated plus restart wait.
    pub fn ettr(&self) -> Option<f64> {
        let wall = self.allocated_gh + self.restart_wait_gh;
        (wall > 0.0).then(|| self.productive_gh / wall)
    }

    /// The buckets inside the allocation summed (all but restart wait): `allocated_gh`
    /// again, when the ledger is whole.
    pub fn inside_gh(&self) -> f64 {
        self.buckets()
            .iter()
            .filter(|(n, _)| *n != "restart wait")
            .map(|(_, v)| v)
            .sum()
    }

    /// The buckets with their names, productive first, in the order tables and charts use.
    pub fn buckets(&self) -> [(&'static str, f64); 9] {
        [
            ("productive", self.productive_gh),
            ("start-up", self.startup_gh),
            ("blocking checkpoint save", self.checkpoint_gh),
            ("re-execution", self.reexec_gh),
            ("restart wait", self.restart_wait_gh),
            ("throttling", self.throttle_gh),
            ("idle allocated", self.idle_gh),
            ("hung", self.hung_gh),
            ("other (no reading)", self.other_gh),
        ]
    }
}

/// One line of a ledger table: a period's start, an account or a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct LedgerRow {
    /// The bucket's start (over time), the account, or the job id.
    pub key: String,
    /// The job's name and account (jobs), else empty.
    pub name: String,
    /// The bucket's start (over time), else 0.
    pub at_ms: UnixMs,
    pub badput: Badput,
}

/// The period's ledger: the cluster's, over time, per account and per job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Ledger {
    pub cluster: Badput,
    /// `day` or `week`: the length of each over-time row.
    pub step: String,
    pub over_time: Vec<LedgerRow>,
    pub accounts: Vec<LedgerRow>,
    /// Most allocated first, at most [`MAX_LISTED`] (the CSV has them all).
    pub jobs: Vec<LedgerRow>,
    pub jobs_total: u32,
}

/// The longest list of interruptions a page carries (the CSV has them all).
pub const MAX_LISTED: usize = 500;

/// Job sizes for the rates, in GPUs (each bucket up to the next's start).
pub const SIZE_BUCKETS: [u32; 7] = [1, 9, 65, 257, 1025, 4097, 16385];

/// How often a job should checkpoint, from what it does and how often jobs of its size are
/// interrupted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct CheckpointAdvice {
    /// Mean save time of its last complete checkpoints (at most [`ADVICE_SAVES`]), seconds.
    pub save_s: f64,
    /// Mean time between the end of one complete save and the start of the next, seconds;
    /// `None` with fewer than two.
    pub interval_s: Option<f64>,
    /// Mean time to interruption of a job of its size, hours, and where it comes from.
    pub mtti_hours: f64,
    pub mtti_basis: String,
    /// The interval that minimises expected loss (Daly's, which is Young's
    /// sqrt(2 x save x MTTI) refined for saves that are not short), seconds.
    pub optimal_interval_s: f64,
    /// Expected GPU-hours a day lost to saving and to re-doing work after interruptions
    /// at its interval and at the optimal one (Young's first-order model:
    /// save / interval + interval / (2 x MTTI) of its GPU time); `None` without an interval.
    pub loss_gpu_hours_per_day: Option<f64>,
    pub optimal_loss_gpu_hours_per_day: f64,
    /// No interruption in the window: `mtti_hours` is a lower bound (the runs' GPU-hours
    /// as if one had just happened), so the optimal interval and the losses are bounds too.
    #[serde(default)]
    pub mtti_at_least: bool,
}

/// What a job's ledger covers: its GPU-hours by the scheduler's times, and from when
/// Gantry booked them (a job that ran before Gantry watched it is booked in part).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobCoverage {
    /// When its first run started, by the scheduler.
    pub first_run_ms: Option<UnixMs>,
    /// Its GPU-hours across its runs, by the scheduler's start and end times.
    pub held_gh: f64,
    /// The hour Gantry's rollups first booked it; `None`: not yet.
    pub booked_from_ms: Option<UnixMs>,
}

impl JobCoverage {
    /// The words under its ETTR: what it covers, and what not, with times.
    pub fn words(&self, booked_gh: f64) -> String {
        let utc = crate::units::utc_minute;
        let ran = self
            .first_run_ms
            .map(|t| format!(", first run from {}", utc(t)))
            .unwrap_or_default();
        if self.held_gh <= 0.0 {
            return "Not started: nothing to count yet.".into();
        }
        if booked_gh <= 0.0 || self.booked_from_ms.is_none() {
            return format!(
                "It has held {}{ran}; Gantry books what it watches, a minute at a time, from the hour it began.",
                crate::units::gpu_hours(self.held_gh)
            );
        }
        let share = (booked_gh / self.held_gh).min(1.0);
        if share >= 0.98 {
            return format!(
                "Covers all of its {}{ran}.",
                crate::units::gpu_hours(self.held_gh)
            );
        }
        format!(
            "Covers {} of its {} ({}){ran}: Gantry counts what it watched, {}; the rest ran before.",
            crate::units::gpu_hours(booked_gh),
            crate::units::gpu_hours(self.held_gh),
            crate::units::percent(Some(share)),
            self.booked_from_ms
                .map(|t| format!("from the hour of {}", utc(t)))
                .unwrap_or_default()
        )
    }
}

/// Saves the advice averages over.
pub const ADVICE_SAVES: usize = 10;
/// A job size's own mean time between interruptions is used once it rests on this many
/// interruptions; below, the cluster's per-GPU rate scaled to the job's size.
pub const ADVICE_MIN_INTERRUPTIONS: u32 = 5;

/// Daly's optimum checkpoint interval (compute time between saves) for save time `delta`
/// and mean time to interruption `m`, in the same unit (J. T. Daly, "A higher order
/// estimate of the optimum checkpoint interval for restart dumps", 2006).
pub fn daly_interval(delta: f64, m: f64) -> f64 {
    if delta >= 2.0 * m {
        return m;
    }
    let x = delta / (2.0 * m);
    (2.0 * delta * m).sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - delta
}

/// The fraction of a job's time lost at interval `tau` (Young's first-order model).
fn loss_fraction(delta: f64, tau: f64, m: f64) -> f64 {
    delta / tau + tau / (2.0 * m)
}

/// Advice for a job of `gpus` GPUs with `checkpoints` (any order), given the period's
/// rates by size and per 1,000 GPUs; `None` without a complete save or any interruption
/// to go on.
pub fn advise(
    gpus: u32,
    checkpoints: &[crate::model::Checkpoint],
    by_size: &[SizeRate],
    mtbi_hours_per_1000_gpus: Option<f64>,
    run_gpu_hours: f64,
) -> Option<CheckpointAdvice> {
    let mut done: Vec<&crate::model::Checkpoint> = checkpoints
        .iter()
        .filter(|c| c.complete && c.duration_ms > 0)
        .collect();
    done.sort_by_key(|c| c.started_ms);
    let recent = &done[done.len().saturating_sub(ADVICE_SAVES)..];
    if recent.is_empty() || gpus == 0 {
        return None;
    }
    let save_s =
        recent.iter().map(|c| c.duration_ms as f64).sum::<f64>() / recent.len() as f64 / 1000.0;
    let gaps: Vec<f64> = recent
        .windows(2)
        .map(|w| (w[1].started_ms - (w[0].started_ms + w[0].duration_ms)) as f64 / 1000.0)
        .filter(|g| *g > 0.0)
        .collect();
    let interval_s = (!gaps.is_empty()).then(|| gaps.iter().sum::<f64>() / gaps.len() as f64);
    let own = by_size
        .iter()
        .find(|s| gpus >= s.gpus_from && gpus <= s.gpus_to)
        .filter(|s| s.interruptions >= ADVICE_MIN_INTERRUPTIONS)
        .and_then(|s| s.mtbi_hours.map(|h| (h, s)));
    let mut mtti_at_least = false;
    let (mtti_hours, mtti_basis) = match (own, mtbi_hours_per_1000_gpus) {
        (Some((h, s)), _) => (
            h,
            format!(
                "jobs of {} GPUs: {} interruptions in {:.0} run hours",
                if s.gpus_to == u32::MAX {
                    format!("{}+", s.gpus_from)
                } else {
                    format!("{}-{}", s.gpus_from, s.gpus_to)
                },
                s.interruptions,
                s.run_hours
            ),
        ),
        (None, Some(per_1000)) => (
            per_1000 * 1000.0 / f64::from(gpus),
            format!("the cluster's rate, {per_1000:.1} h per 1,000 GPUs, at {gpus} GPUs"),
        ),
        // No interruption in the window: at least as long as if one had just happened.
        (None, None) if run_gpu_hours > 0.0 => {
            mtti_at_least = true;
            (
                run_gpu_hours / f64::from(gpus),
                format!(
                    "no interruption in {} GPU-hours of runs: at least this, at {gpus} GPUs",
                    crate::units::thousands(run_gpu_hours.round() as u64)
                ),
            )
        }
        (None, None) => return None,
    };
    let m = mtti_hours * 3600.0;
    if m <= 0.0 || !m.is_finite() {
        return None;
    }
    let optimal_interval_s = daly_interval(save_s, m).max(save_s.min(m));
    let per_day = |tau: f64| f64::from(gpus) * 24.0 * loss_fraction(save_s, tau, m).min(1.0);
    Some(CheckpointAdvice {
        save_s,
        interval_s,
        mtti_hours,
        mtti_basis,
        optimal_interval_s,
        loss_gpu_hours_per_day: interval_s.map(per_day),
        optimal_loss_gpu_hours_per_day: per_day(optimal_interval_s),
        mtti_at_least,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Checkpoint;

    #[test]
    fn daly_refines_young_and_caps_at_the_mtti() {
        // 45 s saves, 10 h between interruptions: Young's sqrt(2 x 45 x 36000) = 1800 s;
        // Daly adds (1/3)sqrt(x) + x/9 with x = 45/72000 and takes the save off.
        let young = (2.0f64 * 45.0 * 36_000.0).sqrt();
        let x: f64 = 45.0 / 72_000.0;
        let want = young * (1.0 + x.sqrt() / 3.0 + x / 9.0) - 45.0;
        assert!((daly_interval(45.0, 36_000.0) - want).abs() < 1e-9);
        assert!((want - 1770.0).abs() < 1.0, "{want}");
        // A save longer than twice the MTTI: checkpoint once per MTTI.
        assert_eq!(daly_interval(100.0, 40.0), 40.0);
    }

    fn ckpt(started_s: i64, duration_s: i64, complete: bool) -> Checkpoint {
        Checkpoint {
            job_id: 1,
            step: Some(started_s as u64),
            path: String::new(),
            size_bytes: 0,
            started_ms: started_s * 1000,
            duration_ms: duration_s * 1000,
            complete,
        }
    }

    #[test]
    fn advice_reads_saves_and_intervals_and_prefers_the_size_s_own_rate() {
        // 256 GPUs saving for 45 s every hour (3555 s of work between saves).
        let cps: Vec<Checkpoint> = (0..12)
            .map(|k| ckpt(k * 3600, 45, true))
            .chain([ckpt(50_000, 900, false)])
            .collect();
        let size = SizeRate {
            gpus_from: 65,
            gpus_to: 256,
            runs: 40,
            run_hours: 100.0,
            gpu_hours: 20_000.0,
            interruptions: 10,
            mtbi_hours: Some(10.0),
        };
        let a = advise(256, &cps, std::slice::from_ref(&size), Some(1.0), 0.0).expect("advice");
        assert_eq!(a.save_s, 45.0);
        assert_eq!(a.interval_s, Some(3555.0));
        assert_eq!(a.mtti_hours, 10.0);
        assert!(
            a.mtti_basis
                .starts_with("jobs of 65-256 GPUs: 10 interruptions"),
            "{}",
            a.mtti_basis
        );
        assert!((a.optimal_interval_s - daly_interval(45.0, 36_000.0)).abs() < 1e-9);
        // Loss at 3555 s: 45/3555 + 3555/72000 of 256 x 24 GPU-hours; at the optimum less.
        let at = |tau: f64| 256.0 * 24.0 * (45.0 / tau + tau / 72_000.0);
        assert!((a.loss_gpu_hours_per_day.unwrap_or(0.0) - at(3555.0)).abs() < 1e-6);
        assert!((a.optimal_loss_gpu_hours_per_day - at(a.optimal_interval_s)).abs() < 1e-6);
        assert!(a.optimal_loss_gpu_hours_per_day < a.loss_gpu_hours_per_day.unwrap_or(0.0));

        // Too few interruptions of its size: the cluster's per-GPU rate at 256 GPUs.
        let thin = SizeRate {
            interruptions: 2,
            ..size
        };
        let a = advise(256, &cps, &[thin], Some(64.0), 0.0).expect("advice");
        assert_eq!(a.mtti_hours, 250.0);
        assert!(a.mtti_basis.contains("per 1,000 GPUs"));
        // Nothing to go on: no advice.
        assert!(advise(256, &cps, &[], None, 0.0).is_none());
        // No interruption in 1,000 h of a 256-GPU job's runs: its MTTI is at least that,
        // and the advice says so.
        let a = advise(256, &cps, &[], None, 256_000.0).expect("a bound");
        assert!(a.mtti_at_least);
        assert!((a.mtti_hours - 1000.0).abs() < 1e-9);
        assert!(
            a.mtti_basis
                .starts_with("no interruption in 256,000 GPU-hours"),
            "{}",
            a.mtti_basis
        );
        assert!(a.optimal_interval_s > daly_interval(a.save_s, 500.0 * 3600.0));
        assert!(advise(256, &[ckpt(0, 45, false)], &[], Some(1.0), 0.0).is_none());
        // One save: no interval, still the optimum.
        let a = advise(8, &[ckpt(0, 30, true)], &[], Some(100.0), 0.0).expect("advice");
        assert_eq!(a.interval_s, None);
        assert_eq!(a.loss_gpu_hours_per_day, None);
    }
}
