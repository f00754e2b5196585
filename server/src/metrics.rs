//! Gantry's own metrics, served at `/metrics` in the Prometheus text format.
//!
//! A handful of atomics, no registry crate: every failure that is logged is also counted
//! here, so an operator can alert on Gantry itself.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Counters and gauges. Shared as `Arc<Metrics>`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub sse_clients: AtomicI64,
    pub sse_connections_total: AtomicU64,
    pub sse_resyncs_total: AtomicU64,
    pub live_ticks_total: AtomicU64,
    pub live_tick_duration_us: AtomicU64,
    pub live_delta_bytes: AtomicU64,
    pub store_writes_total: AtomicU64,
    pub store_errors_total: AtomicU64,
    pub store_queue_dropped_total: AtomicU64,
    pub store_write_retries_total: AtomicU64,
    pub store_writes_failed_total: AtomicU64,
    pub store_writes_fenced_total: AtomicU64,
    /// The leader term this replica holds; 0 while it stands by.
    pub leader_term: AtomicU64,
    pub scrapes_total: AtomicU64,
    pub scrape_failures_total: AtomicU64,
    pub scrape_samples_total: AtomicU64,
    pub scrape_line_errors_total: AtomicU64,
    pub hot_window_bytes: AtomicU64,
    pub slurm_polls_total: AtomicU64,
    pub slurm_poll_errors_total: AtomicU64,
    pub sign_ins_failed_total: AtomicU64,
    pub sign_ins_throttled_total: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_refused_total: AtomicU64,
    pub sse_refused_total: AtomicU64,
    pub sse_dropped_slow_total: AtomicU64,
}

/// Decrements the SSE client gauge when a stream ends, however it ends.
pub struct SseClientGuard(Arc<Metrics>);

impl Metrics {
    pub fn sse_client(self: &Arc<Self>) -> SseClientGuard {
        self.sse_clients.fetch_add(1, Relaxed);
        self.sse_connections_total.fetch_add(1, Relaxed);
        SseClientGuard(Arc::clone(self))
    }

    pub fn record_scrape_round(&self, r: &crate::telemetry::scrape::RoundStats) {
        self.scrapes_total.fetch_add(r.targets as u64, Relaxed);
        self.scrape_failures_total
            .fetch_add(r.failed as u64, Relaxed);
        self.scrape_samples_total
            .fetch_add(r.samples as u64, Relaxed);
        self.scrape_line_errors_total
            .fetch_add(r.line_errors as u64, Relaxed);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let mut one = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        one(
            "gantry_sse_clients",
            "gauge",
            "Open live (SSE) streams.",
            self.sse_clients.load(Relaxed).to_string(),
        );
        one(
            "gantry_sse_connections_total",
            "counter",
            "Live streams opened.",
            self.sse_connections_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_sse_resyncs_total",
            "counter",
            "Snapshots re-sent to clients that fell behind.",
            self.sse_resyncs_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_sse_refused_total",
            "counter",
            "Live streams refused by the total or per-user cap.",
            self.sse_refused_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_sse_dropped_slow_total",
            "counter",
            "Live streams ended because their client did not read them.",
            self.sse_dropped_slow_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_sign_ins_failed_total",
            "counter",
            "Sign-ins refused for a wrong name or password.",
            self.sign_ins_failed_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_sign_ins_throttled_total",
            "counter",
            "Sign-ins refused unchecked: throttled (429) or the checker busy (503).",
            self.sign_ins_throttled_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_connections",
            "gauge",
            "Open client connections.",
            self.connections_open.load(Relaxed).to_string(),
        );
        one(
            "gantry_connections_refused_total",
            "counter",
            "Connections refused at the connection cap.",
            self.connections_refused_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_live_ticks_total",
            "counter",
            "Live state updates published.",
            self.live_ticks_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_live_tick_duration_seconds",
            "gauge",
            "Time the last live update took (source, aggregation, diff).",
            format!(
                "{:.6}",
                self.live_tick_duration_us.load(Relaxed) as f64 / 1e6
            ),
        );
        one(
            "gantry_live_delta_bytes",
            "gauge",
            "Size of the last delta sent to live clients.",
            self.live_delta_bytes.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_writes_total",
            "counter",
            "Store writes completed.",
            self.store_writes_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_errors_total",
            "counter",
            "Store write attempts that failed (a write retried after an error counts each try).",
            self.store_errors_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_queue_dropped_total",
            "counter",
            "Store writes dropped because the queue was full, or abandoned at shutdown with the database still failing.",
            self.store_queue_dropped_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_write_retries_total",
            "counter",
            "Store writes tried again after an error that may pass (busy, locked, connection lost).",
            self.store_write_retries_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_writes_failed_total",
            "counter",
            "Store writes dropped for an error retrying cannot fix (a constraint, bad SQL).",
            self.store_writes_failed_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_store_writes_fenced_total",
            "counter",
            "History writes of a leader term that had ended, not written (another replica leads).",
            self.store_writes_fenced_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_leader_term",
            "gauge",
            "The leader lease's term this replica holds; 0 while it stands by.",
            self.leader_term.load(Relaxed).to_string(),
        );
        one(
            "gantry_slurm_polls_total",
            "counter",
            "Successful polls of the scheduler (one per interval, whatever the number of viewers).",
            self.slurm_polls_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_slurm_poll_errors_total",
            "counter",
            "Scheduler polls that failed; views go stale meanwhile.",
            self.slurm_poll_errors_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_scrapes_total",
            "counter",
            "Exporter scrapes attempted.",
            self.scrapes_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_scrape_failures_total",
            "counter",
            "Exporter scrapes that failed (see /api/targets).",
            self.scrape_failures_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_scrape_samples_total",
            "counter",
            "Samples read from exporters.",
            self.scrape_samples_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_scrape_line_errors_total",
            "counter",
            "Exporter lines that could not be read.",
            self.scrape_line_errors_total.load(Relaxed).to_string(),
        );
        one(
            "gantry_hot_window_bytes",
            "gauge",
            "Memory held by the hot window (last hour of readings).",
            self.hot_window_bytes.load(Relaxed).to_string(),
        );
        out
    }
}

impl Drop for SseClientGuard {
    fn drop(&mut self) {
        self.0.sse_clients.fetch_sub(1, Relaxed);
    }
}
