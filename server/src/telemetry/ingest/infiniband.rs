//! node_exporter's InfiniBand counters: data bytes and link-down events summed over a
//! node's ports, from its text or (as a rate) from a PromQL store; the rate between two
//! scrapes, none across a reset.

use app::model::UnixMs;

use crate::telemetry::exposition;

/// The sum of node_exporter's InfiniBand data counters (received and sent, every port),
/// if it has any.
pub fn read_ib_total(body: &[u8]) -> (Option<f64>, exposition::Report) {
    let (ib, report) = read_ib(body);
    (ib.bytes_total, report)
}

/// What Gantry reads from node_exporter's InfiniBand collector, summed over a node's ports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IbCounters {
    /// Data bytes received plus sent.
    pub bytes_total: Option<f64>,
    /// Times a link failed to recover from an error and went down.
    pub link_downed_total: Option<u64>,
}

/// The counters of a node_exporter body.
pub fn read_ib(body: &[u8]) -> (IbCounters, exposition::Report) {
    let mut out = IbCounters::default();
    let report = exposition::parse_classified(
        body,
        |name| {
            if IB_METRICS.contains(&name) {
                Some(true)
            } else {
                (name == IB_LINK_DOWNED).then_some(false)
            }
        },
        |bytes, s| {
            if s.value.is_finite() && s.value >= 0.0 {
                if bytes {
                    *out.bytes_total.get_or_insert(0.0) += s.value;
                } else {
                    // A counter of events: whole, and far below 2^53.
                    *out.link_downed_total.get_or_insert(0) += s.value as u64;
                }
            }
        },
    );
    (out, report)
}

/// The InfiniBand port counters Gantry reads from node_exporter (its `infiniband`
/// collector): bytes received and sent, per HCA port.
pub const IB_METRICS: [&str; 2] = [
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_port_data_transmitted_bytes_total",
];

/// node_exporter's count of link-down events per HCA port (`link_downed` in sysfs).
pub const IB_LINK_DOWNED: &str = "node_infiniband_link_downed_total";

/// The link-down counters through a PromQL store, summed over each node's ports.
pub const IB_LINK_DOWNED_PROMQL: &str =
    "sum without (device, port) (node_infiniband_link_downed_total)";

/// The same counters through a PromQL store: bytes per second received and sent, summed
/// over each node's HCA ports. The window spans several scrapes at any usual interval
/// (15 s to 30 s), so one missed scrape does not blank a node.
/// (Two sums added, not one over both names: without their names the two counters of a
/// port have the same labels, which PromQL refuses in one vector.)
pub const IB_RATE_PROMQL: &str = "sum without (device, port) (rate(node_infiniband_port_data_received_bytes_total[2m])) + sum without (device, port) (rate(node_infiniband_port_data_transmitted_bytes_total[2m]))";

/// The rate of a counter between two readings `(value, at_ms)`; none across a reset (the
/// counter went down) or without two readings.
pub(super) fn counter_rate(prev: Option<(f64, UnixMs)>, now: Option<(f64, UnixMs)>) -> Option<f64> {
    let ((v0, t0), (v1, t1)) = (prev?, now?);
    (t1 > t0 && v1 >= v0).then(|| (v1 - v0) * 1000.0 / (t1 - t0) as f64)
}
