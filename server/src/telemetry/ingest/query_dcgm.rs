//! The PromQL path's GPUs at fleet size: every DCGM field read through a bounded number of
//! small queries, however many GPUs.
//!
//! One query for every DCGM series returns each series with all its labels, about 88 KB of
//! JSON a node: the 16 MiB bound on an answer is reached at about 190 nodes. Instead:
//! - **which fields the store has**: the metric names of its index
//!   (`/api/v1/label/__name__/values`, the last 10 minutes) that are DCGM's, and whether
//!   one GPU field's series name no host (`count by (__name__)` of them; then `instance`
//!   names their node). No query selects more than one field's series: a store bounds
//!   the series one query may select (VictoriaMetrics: 300,000 by default, which every
//!   DCGM series of 1,200 nodes passes; asking `count by (__name__)` of them all failed
//!   there at 2,048 nodes);
//! - **values**, one query per field the store has: `max by (Hostname, hostname, gpu,
//!   GPU_I_ID)` (plus `instance` where a series names no host, `err_msg` for the last XID;
//!   switch fields by `nvswitch` and `nvlink`), about 80 bytes a GPU, so one answer holds
//!   some 200,000 GPUs; asked [`CONCURRENCY`] at a time;
//! - **identity** (UUID, model, bus, driver, MIG profile, pod, `hpc_job`, placement): the
//!   labels of one field's series, `count by` those labels, every [`IDENTITY_EVERY_MS`] or
//!   when the number of GPUs changes, split by `gpu` index into answers of at most
//!   [`IDENTITY_SHARD_SERIES`] series; kept between and given to the GPUs that have values
//!   this round, so a GPU gone from the store is not revived by its cached identity.
//!
//! The queries a round: 2 + the fields the store has (+ the identity's shards when due).

use std::collections::HashSet;

use futures_util::{stream, StreamExt};

use app::model::UnixMs;

use crate::cluster::placement;
use crate::telemetry::dcgm::{self, DcgmScrape};
use crate::telemetry::promql::{PromError, PromQl, Series};

/// Queries in flight at once.
pub const CONCURRENCY: usize = 4;
/// The metric names asked of the store's index: those with samples in this window.
const NAMES_SINCE_MS: i64 = 10 * 60_000;
/// How often the GPUs' identity labels are asked again (and whenever the GPU count moves).
pub const IDENTITY_EVERY_MS: i64 = 60_000;
/// At most this many series in one identity answer (about 300 bytes each).
pub const IDENTITY_SHARD_SERIES: usize = 30_000;

/// The labels that say where a value belongs.
const PLACE: &[&str] = &["Hostname", "hostname", "gpu", "GPU_I_ID"];
/// The labels that say who a GPU is (read by `dcgm::Decoder`).
const IDENTITY: &[&str] = &[
    "Hostname",
    "hostname",
    "instance",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "UUID",
    "uuid",
    "modelName",
    "model_name",
    "pci_bus_id",
    "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_SYSTEM_DRIVER_VERSION",
    "hpc_job",
    "pod",
    "pod_name",
    placement::CHASSIS_SERIAL_LABEL,
    placement::SLOT_LABEL,
    placement::TRAY_LABEL,
    placement::HOST_LABEL,
    placement::MODULE_LABEL,
];
/// The labels that say which switch (and link) a switch field is about.
const SWITCH_PLACE: &[&str] = &["Hostname", "hostname", "instance", "nvswitch", "nvlink"];

/// What the PromQL path keeps between rounds for the GPUs.
#[derive(Default)]
pub struct DcgmQueries {
    /// The identity series last read, and of which field.
    identity: Vec<Series>,
    identity_field: String,
    identity_gpus: usize,
    identity_at_ms: Option<UnixMs>,
}

/// One round's GPUs, and what reading them took.
pub struct DcgmRound {
    pub scrape: DcgmScrape,
    pub queries: usize,
    pub series: usize,
}

/// The node a series belongs to, as the decoder names it: its `Hostname` (or `hostname`)
/// label, else its `instance` host.
fn host_of(s: &Series) -> &str {
    s.labels
        .get("Hostname")
        .or_else(|| s.labels.get("hostname"))
        .map(String::as_str)
        .unwrap_or_else(|| s.instance_host())
}

fn key_of(s: &Series) -> (String, Option<String>, Option<String>) {
    (
        host_of(s).to_string(),
        s.labels.get("gpu").cloned(),
        s.labels.get("GPU_I_ID").cloned(),
    )
}

fn by(labels: &[&str]) -> String {
    labels.join(", ")
}

/// The query for one field's values.
fn value_query(field: &str, switch: bool, need_instance: bool) -> String {
    if switch {
        return format!("max by ({}) ({field}{{gpu=\"\"}})", by(SWITCH_PLACE));
    }
    let mut labels = PLACE.to_vec();
    if need_instance {
        labels.push("instance");
    }
    if dcgm::gpu_field(field) == Some(dcgm::Field::LastXid) {
        labels.push("err_msg");
    }
    format!("max by ({}) ({field})", by(&labels))
}

/// The identity queries for `field`: one, or one per set of `gpu` indexes (from
/// `indexes`, the field's series counted by index) so none answers more than
/// [`IDENTITY_SHARD_SERIES`] series.
fn identity_queries(field: &str, gpus: usize, indexes: &[(String, usize)]) -> Vec<String> {
    let all = format!("count by ({}) ({field})", by(IDENTITY));
    if gpus <= IDENTITY_SHARD_SERIES || indexes.len() < 2 {
        return vec![all];
    }
    // Greedy: each index into the shard holding fewest series so far.
    let shards = gpus.div_ceil(IDENTITY_SHARD_SERIES).min(indexes.len());
    let mut sets: Vec<(usize, Vec<&str>)> = vec![(0, Vec::new()); shards];
    let mut sorted: Vec<&(String, usize)> = indexes.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (idx, n) in sorted {
        if let Some(set) = sets.iter_mut().min_by_key(|(c, _)| *c) {
            set.0 += n;
            set.1.push(idx);
        }
    }
    sets.into_iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(_, s)| {
            let re = s
                .iter()
                .map(|i| super::query::regex_escape(i))
                .collect::<Vec<_>>()
                .join("|");
            format!("count by ({}) ({field}{{gpu=~\"{re}\"}})", by(IDENTITY))
        })
        .collect()
}

/// `(label value, count)` of a `count by (label)` answer.
fn counts(series: &[Series], label: &str) -> Vec<(String, usize)> {
    series
        .iter()
        .filter_map(|s| {
            let v = s.points.last()?.1;
            if !(v.is_finite() && v >= 0.0) {
                return None;
            }
            Some((s.labels.get(label)?.clone(), v as usize))
        })
        .collect()
}

impl DcgmQueries {
    /// Reads every GPU (and NVSwitch) the store has. Fails when a value or identity query
    /// fails: a round without some fields would show GPUs with readings missing as current.
    pub async fn read(&mut self, prom: &PromQl, now_ms: UnixMs) -> Result<DcgmRound, PromError> {
        let is_switch = |f: &str| dcgm::gpu_field(f).is_none();
        let mut names: Vec<String> = prom
            .label_values("__name__", now_ms - NAMES_SINCE_MS)
            .await?
            .into_iter()
            .filter(|n| dcgm::is_metric_name(n))
            .collect();
        names.sort();
        names.dedup();
        // Whether the exporters name their host (else `instance` names the node): asked
        // of one GPU field only.
        let need_instance = match names.iter().find(|f| !is_switch(f)) {
            Some(f) => !prom
                .query(
                    &format!("count by (__name__) ({f}{{Hostname=\"\",hostname=\"\"}})"),
                    None,
                )
                .await?
                .is_empty(),
            None => false,
        };
        let mut queries = 2;
        // Series read this round: the identity's only when asked again.
        let mut identity_read = 0;

        // Values, a query a field, a few at a time, kept in the fields' order.
        let asks: Vec<(usize, String)> = names
            .iter()
            .enumerate()
            .map(|(i, f)| (i, value_query(f, is_switch(f), need_instance)))
            .collect();
        let asked: Vec<(usize, Result<Vec<Series>, PromError>)> = stream::iter(asks)
            .map(|(i, q)| {
                let prom = prom.clone();
                async move { (i, prom.query(&q, None).await) }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        queries += asked.len();
        let mut answers: Vec<Option<Vec<Series>>> = vec![None; names.len()];
        for (i, a) in asked {
            answers[i] = Some(a?);
        }
        // Each field with its count of GPUs (or switch links): its answer's series.
        let fields: Vec<(String, usize)> = names
            .into_iter()
            .zip(&answers)
            .map(|(f, a)| (f, a.as_ref().map_or(0, Vec::len)))
            .collect();

        // Identity: of the GPU field with the most series (every GPU has it).
        let rep = fields
            .iter()
            .filter(|(f, _)| !is_switch(f))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .cloned();
        if let Some((field, gpus)) = &rep {
            let due = self.identity_field != *field
                || self.identity_gpus != *gpus
                || self
                    .identity_at_ms
                    .is_none_or(|t| now_ms - t >= IDENTITY_EVERY_MS);
            if due {
                let indexes = if *gpus > IDENTITY_SHARD_SERIES {
                    queries += 1;
                    counts(
                        &prom
                            .query(&format!("count by (gpu) ({field})"), None)
                            .await?,
                        "gpu",
                    )
                } else {
                    Vec::new()
                };
                let mut identity = Vec::new();
                for q in identity_queries(field, *gpus, &indexes) {
                    queries += 1;
                    identity.extend(prom.query(&q, None).await?);
                }
                self.identity = identity;
                self.identity_field = field.clone();
                self.identity_gpus = *gpus;
                self.identity_at_ms = Some(now_ms);
                identity_read = self.identity.len();
            }
        } else {
            self.identity.clear();
        }

        let (scrape, values) = decode(&fields, &answers, &self.identity, &self.identity_field);
        Ok(DcgmRound {
            scrape,
            queries,
            series: values + identity_read,
        })
    }
}

/// The GPUs (and switches) of one round: each field's answer (`fields[i]` answered by
/// `answers[i]`), then the identity series of the GPUs that have values (as samples of
/// `identity_field` with no value). Returns them and the value series read. Pure.
fn decode(
    fields: &[(String, usize)],
    answers: &[Option<Vec<Series>>],
    identity: &[Series],
    identity_field: &str,
) -> (DcgmScrape, usize) {
    let mut decoder = dcgm::Decoder::default();
    let mut with_values: HashSet<(String, Option<String>, Option<String>)> = HashSet::new();
    let mut series = 0;
    for ((field, _), answer) in fields.iter().zip(answers) {
        let gpu = dcgm::gpu_field(field).is_some();
        for s in answer.iter().flatten() {
            series += 1;
            if gpu {
                with_values.insert(key_of(s));
            }
            if let Some(&(_, v)) = s.points.last() {
                decoder.push(&s.sample_as(field, v), s.instance_host());
            }
        }
    }
    for s in identity {
        if with_values.contains(&key_of(s)) {
            decoder.push_identity(&s.sample_as(identity_field, f64::NAN), s.instance_host());
        }
    }
    (decoder.finish(), series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_queries_keep_only_where_a_value_belongs() {
        assert_eq!(
            value_query("DCGM_FI_DEV_POWER_USAGE", false, false),
            "max by (Hostname, hostname, gpu, GPU_I_ID) (DCGM_FI_DEV_POWER_USAGE)"
        );
        assert_eq!(
            value_query("DCGM_FI_DEV_XID_ERRORS", false, true),
            "max by (Hostname, hostname, gpu, GPU_I_ID, instance, err_msg) (DCGM_FI_DEV_XID_ERRORS)"
        );
        assert_eq!(
            value_query("DCGM_FI_DEV_NVSWITCH_LINK_STATUS", true, false),
            "max by (Hostname, hostname, instance, nvswitch, nvlink) (DCGM_FI_DEV_NVSWITCH_LINK_STATUS{gpu=\"\"})"
        );
    }

    fn series(labels: &[(&str, &str)], v: f64) -> Series {
        Series {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            points: vec![(1_795_968_000_000, v)],
        }
    }

    #[test]
    fn values_take_their_gpus_identity_and_a_gpu_without_values_is_not_revived() {
        let fields = vec![
            ("DCGM_FI_DEV_POWER_USAGE".to_string(), 2),
            ("DCGM_FI_DEV_XID_ERRORS".to_string(), 1),
        ];
        let answers = vec![
            Some(vec![
                series(&[("Hostname", "gpu001"), ("gpu", "0")], 612.0),
                series(&[("Hostname", "gpu001"), ("gpu", "1")], 140.0),
            ]),
            Some(vec![series(
                &[("Hostname", "gpu001"), ("gpu", "1"), ("err_msg", "DBE")],
                48.0,
            )]),
        ];
        let identity = vec![
            series(
                &[
                    ("Hostname", "gpu001"),
                    ("instance", "gpu001:9400"),
                    ("gpu", "0"),
                    ("UUID", "GPU-0"),
                    ("modelName", "NVIDIA GB200"),
                    ("hpc_job", "4242"),
                    (placement::CHASSIS_SERIAL_LABEL, "1821324000123"),
                    (placement::SLOT_LABEL, "5"),
                ],
                1.0,
            ),
            series(
                &[("Hostname", "gpu001"), ("gpu", "1"), ("UUID", "GPU-1")],
                1.0,
            ),
            // Gone from the store's values: its cached identity makes no GPU.
            series(
                &[("Hostname", "gpu002"), ("gpu", "0"), ("UUID", "GPU-2")],
                1.0,
            ),
        ];
        let (scrape, n) = decode(&fields, &answers, &identity, "DCGM_FI_DEV_POWER_USAGE");
        assert_eq!(n, 3, "value series");
        assert_eq!(scrape.gpus.len(), 2, "{:?}", scrape.gpus);
        let g0 = &scrape.gpus[0];
        assert_eq!(g0.uuid.as_deref(), Some("GPU-0"));
        assert_eq!(g0.model.as_deref(), Some("NVIDIA GB200"));
        assert_eq!(g0.hpc_jobs, vec!["4242".to_string()]);
        assert_eq!(
            g0.place
                .as_ref()
                .map(|p| (p.chassis_serial.as_str(), p.slot)),
            Some(("1821324000123", Some(5)))
        );
        // The identity's sample carries no value: the field's own answer stands.
        assert_eq!(g0.readings.get(&dcgm::Field::PowerWatts), Some(&612.0));
        assert!(g0.no_data.is_empty(), "{:?}", g0.no_data);
        let g1 = &scrape.gpus[1];
        assert_eq!(g1.uuid.as_deref(), Some("GPU-1"));
        assert_eq!(g1.last_xid_message.as_deref(), Some("DBE"));
        assert_eq!(g1.readings.get(&dcgm::Field::LastXid), Some(&48.0));
    }

    #[test]
    fn identity_splits_by_gpu_index_only_past_its_bound() {
        let idx: Vec<(String, usize)> = (0..8).map(|i| (i.to_string(), 16_384)).collect();
        assert_eq!(identity_queries("F", 30_000, &idx).len(), 1);
        let q = identity_queries("F", 131_072, &idx);
        assert_eq!(q.len(), 5, "{q:?}");
        // Every index in exactly one shard, none over the bound where it can be helped.
        let mut seen: Vec<String> = Vec::new();
        for one in &q {
            let re = one.split("gpu=~\"").nth(1).expect("regex");
            let re = re.trim_end_matches("\"})");
            seen.extend(re.split('|').map(str::to_string));
        }
        seen.sort();
        assert_eq!(seen, (0..8).map(|i| i.to_string()).collect::<Vec<_>>());
    }
}
