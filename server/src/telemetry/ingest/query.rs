//! The PromQL path: [`Ingest::query_promql`] fills the same per-node and per-rack latest
//! readings as a scrape, from a Prometheus-compatible store's instant queries.

use std::collections::HashMap;

use app::model::{CoolantReading, UnixMs};

use super::{
    bmc_sample, Ingest, RoundStats, FABRIC_MIN_INTERVAL, IB_LINK_DOWNED_PROMQL, IB_RATE_PROMQL,
};
use crate::telemetry::dcgm;
use crate::telemetry::nvlink_fabric::{self, FabricReader};
use crate::telemetry::promql::{PromError, PromQl};
use crate::telemetry::shelves::ShelfReader;

/// Queries per PromQL round besides the GPUs' (counted as targets in the scrape metrics;
/// the NVLink fabric's three, asked at most every [`FABRIC_MIN_INTERVAL`], count as one).
/// The GPUs take 2 more and one a DCGM field the store has ([`super::query_dcgm`]).
pub const PROMQL_QUERIES: usize = 8;

/// When each node's GPUs were last sampled by the store: the newest sample time of its
/// GPUs' DCGM power series (an instant query answers at the time it is asked, whatever the
/// age of the samples behind it), one series per node. A node none of whose GPUs has a
/// power series is not refreshed: it shows as not reporting rather than as current.
const GPU_SAMPLED_PROMQL: &str = "max by (Hostname, instance) (timestamp(DCGM_FI_DEV_POWER_USAGE))";

impl Ingest {
    /// Fills the latest readings from a PromQL store instead of scraping: the GPUs through
    /// a query a DCGM field ([`super::query_dcgm`]; and one for when the store last sampled
    /// each node's GPUs), one for
    /// node power, one for inlet temperature (both as range selectors over `fresh_ms`, so
    /// each value keeps its own sample time), one for InfiniBand
    /// traffic (node_exporter's counters as a rate, where the store has them; none is not
    /// an error, and a failure of this query alone leaves the rest of the round standing,
    /// counted as one failed target). GPUs are placed by
    /// their exporter's `Hostname` label, else by the `instance` host; BMC series by a
    /// `node`/`hostname` label, else by the `instance` host.
    pub async fn query_promql(
        &mut self,
        prom: &PromQl,
        now_ms: UnixMs,
        fresh_ms: i64,
    ) -> Result<RoundStats, PromError> {
        // Every reading is stamped with the store's own sample time, so a store that lags
        // (it answers, but its newest samples are old) shows its data stale, not current.
        let window = format!("[{}s]", (fresh_ms.max(1000) + 999) / 1000);
        let dcgm_round = self.dcgm_queries.read(prom, now_ms).await?;
        let selector = |metric: &str, label: &Option<(String, String)>| match label {
            Some((k, v)) => format!(
                "{metric}{{{k}=\"{}\"}}",
                v.replace('\\', "\\\\").replace('"', "\\\"")
            ),
            None => metric.to_string(),
        };
        let m = self.mapping.clone();
        let power = prom
            .query(
                &format!("{}{window}", selector(&m.power_metric, &m.power_label)),
                None,
            )
            .await?;
        let inlet = prom
            .query(
                &format!("{}{window}", selector(&m.inlet_metric, &m.inlet_label)),
                None,
            )
            .await?;
        let gpu_sampled = prom.query(GPU_SAMPLED_PROMQL, None).await?;
        // The coolant loop's four readings in one query: an air-cooled cluster has none of
        // them, which is no error; a failure of this query loses only them.
        let coolant_selector = m.pickers()[2..]
            .iter()
            .map(|(metric, label)| selector(metric, label))
            .collect::<Vec<_>>()
            .join(" or ");
        let (coolant, coolant_failed) = match prom.query(&coolant_selector, None).await {
            Ok(c) => (c, 0),
            Err(e) => {
                tracing::warn!(error = %e, "PromQL coolant query failed; coolant shows as missing");
                (Vec::new(), 1)
            }
        };
        let (ib, ib_failed) = match prom.query(IB_RATE_PROMQL, None).await {
            Ok(ib) => {
                self.ib_failing = false;
                (ib, 0)
            }
            Err(e) => {
                if !self.ib_failing {
                    tracing::warn!(error = %e, "PromQL InfiniBand query failed; traffic shows as missing");
                }
                self.ib_failing = true;
                (Vec::new(), 1)
            }
        };

        // Like traffic, link-down counters are optional: a failure loses only them.
        let (downs, downs_failed) = match prom.query(IB_LINK_DOWNED_PROMQL, None).await {
            Ok(d) => (d, 0),
            Err(e) => {
                if !self.ib_failing {
                    tracing::warn!(error = %e, "PromQL InfiniBand link query failed");
                }
                (Vec::new(), 1)
            }
        };

        // Racks' power shelves: optional too. A series names its rack by a `rack` label,
        // else by its `instance` host (the power controller the exporter reads).
        let shelf_selector = format!(
            "{{__name__=~\"{}\"}}",
            m.shelf_names()
                .metrics
                .iter()
                .map(|n| regex_escape(n))
                .collect::<Vec<_>>()
                .join("|")
        );
        let (shelf_series, shelves_failed) = match prom.query(&shelf_selector, None).await {
            Ok(x) => (x, 0),
            Err(e) => {
                tracing::warn!(error = %e, "PromQL power shelf query failed; shelves show as not reporting");
                (Vec::new(), 1)
            }
        };
        let mut shelf_readers: HashMap<String, ShelfReader> = HashMap::new();
        for s in &shelf_series {
            let Some(&(_, v)) = s.points.last() else {
                continue;
            };
            let rack = s
                .labels
                .get("rack")
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string());
            shelf_readers.entry(rack).or_default().push(
                &m.shelf_names(),
                s.name(),
                |k| s.labels.get(k).map(String::as_str),
                v,
            );
        }
        for (rack, reader) in shelf_readers {
            let l = self.rack_latest.entry(rack).or_default();
            l.shelves = reader.finish();
            l.at_ms = Some(now_ms);
        }

        // NVLink domains (NMX-T): optional too, and asked at most every
        // FABRIC_MIN_INTERVAL (between, the last answer stays as fresh as it is).
        let fabric_due = self
            .fabric_queried_ms
            .is_none_or(|t| now_ms - t >= FABRIC_MIN_INTERVAL.as_millis() as i64);
        let (mut fabric_samples, mut fabric_failed) = (0, 0);
        if fabric_due {
            self.fabric_queried_ms = Some(now_ms);
            match self.query_fabric(prom, now_ms).await {
                Ok(n) => fabric_samples = n,
                Err(e) => {
                    tracing::warn!(error = %e, "PromQL NVLink fabric query failed; switch trays show as not reporting");
                    fabric_failed = 1;
                }
            }
        }

        let decoded = dcgm_round.scrape;
        let mut by_node: HashMap<String, Vec<&dcgm::DcgmGpu>> = HashMap::new();
        for g in decoded.gpus.iter().filter(|g| g.mig_instance.is_none()) {
            by_node.entry(g.host.clone()).or_default().push(g);
        }
        let mut switches: HashMap<&str, Vec<app::model::SwitchReading>> = HashMap::new();
        for sw in &decoded.switches {
            switches.entry(&sw.host).or_default().push(sw.to_reading());
        }
        let sampled: HashMap<String, UnixMs> = gpu_sampled
            .iter()
            .filter_map(|s| {
                let (_, secs) = *s.points.last()?;
                let node = s
                    .labels
                    .get("Hostname")
                    .cloned()
                    .unwrap_or_else(|| s.instance_host().to_string());
                secs.is_finite()
                    .then(|| (node, (secs * 1000.0).round() as UnixMs))
            })
            .collect();
        for (node, gpus) in by_node {
            // A node whose sample time the store did not say is not refreshed (it ages).
            let Some(at_ms) = sampled.get(&node).map(|t| (*t).min(now_ms)) else {
                continue;
            };
            let sw = switches.remove(node.as_str()).unwrap_or_default();
            let l = self.latest.entry(node).or_default();
            l.gpus = gpus.iter().map(|g| g.to_reading()).collect();
            l.places = gpus.iter().filter_map(|g| g.place.clone()).collect();
            l.switches = sw;
            l.gpus_at_ms = Some(at_ms);
        }
        let node_of = |s: &crate::telemetry::promql::Series| -> String {
            ["node", "hostname", "Hostname"]
                .iter()
                .find_map(|k| s.labels.get(*k))
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string())
        };
        // The range selectors' points are the store's samples, at their own times: a node's
        // BMC reading is as old as the older of its power and inlet samples this round.
        let mut bmc_sampled: HashMap<String, UnixMs> = HashMap::new();
        for s in &power {
            if let Some(&(t, v)) = s.points.last().filter(|(_, v)| v.is_finite()) {
                let node = node_of(s);
                bmc_sampled.insert(node.clone(), t.min(now_ms));
                self.latest.entry(node).or_default().power_watts = Some(v);
            }
        }
        for s in &inlet {
            if let Some(&(t, v)) = s.points.last().filter(|(_, v)| v.is_finite()) {
                let node = node_of(s);
                let at = bmc_sampled
                    .get(&node)
                    .map_or(t, |p| (*p).min(t))
                    .min(now_ms);
                bmc_sampled.insert(node.clone(), at);
                self.latest.entry(node).or_default().inlet_celsius = Some(v);
            }
        }
        for (node, at) in &bmc_sampled {
            self.latest.entry(node.clone()).or_default().bmc_at_ms = Some(*at);
        }
        let pickers = m.pickers();
        let mut coolant_by_node: HashMap<String, (Option<f64>, Option<f64>, CoolantReading)> =
            HashMap::new();
        for s in &coolant {
            let Some(&(_, v)) = s.points.last() else {
                continue;
            };
            let name = s.labels.get("__name__").map(String::as_str).unwrap_or("");
            let which = pickers
                .iter()
                .enumerate()
                .skip(2)
                .find(|(_, (metric, label))| {
                    name == *metric
                        && label
                            .as_ref()
                            .is_none_or(|(k, want)| s.labels.get(k) == Some(want))
                });
            if let Some((i, _)) = which {
                bmc_sample(i, v, coolant_by_node.entry(node_of(s)).or_default());
            }
        }
        for (node, (_, _, c)) in coolant_by_node {
            // Judged by the node's power and inlet samples: coolant alone (an instant query,
            // stamped with when it was asked) never makes a node's BMC reading fresh.
            self.latest.entry(node).or_default().coolant = c;
        }
        for s in &ib {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.ib_bytes_per_second = Some(v);
                l.node_at_ms = Some(now_ms);
            }
        }
        for s in &downs {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                let l = self.latest.entry(node_of(s)).or_default();
                l.ib_link_downed = Some(v as u64);
                l.node_at_ms = Some(now_ms);
            }
        }
        Ok(RoundStats {
            targets: PROMQL_QUERIES + dcgm_round.queries,
            failed: ib_failed + downs_failed + coolant_failed + shelves_failed + fabric_failed,
            samples: fabric_samples
                + dcgm_round.series
                + gpu_sampled.len()
                + shelf_series.len()
                + power.len()
                + inlet.len()
                + coolant.len()
                + ib.len()
                + downs.len(),
            line_errors: 0,
        })
    }

    /// Each NVLink domain's fabric from a PromQL store's NMX-T series, in three queries that
    /// keep the answer small whatever the domain's size: the GPU ports active counted per
    /// switch ASIC (`link_partner_description`), the GPU ports not active one by one, and
    /// the link-down events summed per switch ASIC. A series names its rack by a `rack`
    /// label, else by its `instance` host (the switch tray NMX-T runs on). Returns the
    /// series read.
    async fn query_fabric(&mut self, prom: &PromQl, now_ms: UnixMs) -> Result<usize, PromError> {
        use nvlink_fabric::{ACTIVE, GPU_DEVICE_PREFIX, LINK_DOWN_METRIC, PORT_METRIC};
        let gpu = format!("{PORT_METRIC}{{Device_ID=~\"{GPU_DEVICE_PREFIX}.*\"");
        let active = prom
            .query(
                &format!("count by (rack, instance, chassis_id, link_partner_description) ({gpu},logical_state=\"{ACTIVE}\"}})"),
                None,
            )
            .await?;
        let down = prom
            .query(&format!("{gpu},logical_state!=\"{ACTIVE}\"}}"), None)
            .await?;
        let events = prom
            .query(
                &format!("sum by (rack, instance, link_partner_description) ({LINK_DOWN_METRIC} * on (instance, Node_GUID, Port_Number) group_left (link_partner_description) {gpu}}})"),
                None,
            )
            .await?;
        let rack_of = |s: &crate::telemetry::promql::Series| -> String {
            s.labels
                .get("rack")
                .cloned()
                .unwrap_or_else(|| s.instance_host().to_string())
        };
        let label = |s: &crate::telemetry::promql::Series, k: &str| s.labels.get(k).cloned();
        let mut readers: HashMap<String, FabricReader> = HashMap::new();
        for s in &active {
            if let Some(&(_, v)) = s.points.last().filter(|(_, v)| v.is_finite() && *v >= 0.0) {
                readers.entry(rack_of(s)).or_default().add_active(
                    label(s, "link_partner_description").as_deref(),
                    label(s, "chassis_id").as_deref(),
                    v as u32,
                );
            }
        }
        for s in &down {
            if let Some(&(_, v)) = s.points.last() {
                readers.entry(rack_of(s)).or_default().push(
                    true,
                    |k| s.labels.get(k).map(String::as_str),
                    v,
                );
            }
        }
        for s in &events {
            if let Some(&(_, v)) = s.points.last() {
                readers
                    .entry(rack_of(s))
                    .or_default()
                    .add_events(label(s, "link_partner_description").as_deref(), v);
            }
        }
        for (rack, reader) in readers {
            let l = self.rack_latest.entry(rack).or_default();
            l.fabric = Some(reader.finish());
            l.fabric_at_ms = Some(now_ms);
        }
        Ok(active.len() + down.len() + events.len())
    }
}

/// `s` with RE2's metacharacters escaped, for a regular expression inside a PromQL
/// double-quoted string (whose own escape doubles the backslash).
pub(super) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$\"".contains(c) {
            out.push_str(if c == '"' { "\\" } else { "\\\\" });
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promql_regular_expressions_are_escaped_inside_the_string() {
        assert_eq!(regex_escape("a_b:c"), "a_b:c");
        assert_eq!(regex_escape("a.b"), "a\\\\.b");
        assert_eq!(regex_escape("a\"b"), "a\\\"b");
    }
}
