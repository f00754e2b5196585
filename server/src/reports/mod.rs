//! Manager reports: where GPU-hours went, what they cost, and how much was goodput.
//!
//! Two halves. The [`Accumulator`] runs inside each source's tick: it adds every tick's
//! GPU-seconds by state (allocated, busy, drained, down), throttling losses, energy and
//! rack shares to the current hour of each group, and emits what it added once a minute
//! (additive upserts into `report_1h`); failures and requeues add the GPU-seconds since the
//! job's last checkpoint. [`build`] answers a report from those hourly sums alone, so a
//! 90-day report never reads raw telemetry. The arithmetic ([`usage`], [`cost`]) is pure.
//!
//! Definitions (also on the page):
//! - a node's GPUs are allocated when a running job is on it (as the overview counts);
//!   a job's share of a node is its GPUs per node over all running jobs' on that node;
//! - an allocated GPU is idle when its SM activity is measured under `idle_below_sm`;
//!   a GPU without a reading is not counted idle;
//! - throttling loses each busy throttled GPU's clock deficit over the tick;
//! - a failure (failed, node fail, timeout) or requeue loses the job's GPUs times the time
//!   since its last complete checkpoint or the start of its run, whichever is later,
//!   counted in the hour of the failure;
//! - goodput = allocated - idle - throttling lost - failures lost;
//! - energy is node power (BMC, else the sum of its GPUs), which can be split among jobs;
//!   the rack's PDU also powers switches and fans, which no job can be charged for.
//!
//! `accumulate.rs` holds the accumulator, `answer.rs` the answer from the rollups and its
//! charts, `rates.rs` usage and cost, `csv.rs` the CSV.

mod accumulate;
mod answer;
mod csv;
pub mod ledger;
mod rates;

pub use accumulate::{loses_work, Accumulator};
pub use answer::{build, data, ReportData, ReportError};
pub use csv::csv;
pub use rates::{bucket_hours, cost, usage, validate};

const HOUR_MS: i64 = 3_600_000;
