//! Reliability: every job interruption of a period with its cause attributed from the
//! evidence Gantry stored, and the rates behind them. Computed at query time from history
//! (job transitions, XIDs, hardware counter steps, node state changes, operators'
//! requeues), so a better rule re-reads the past; the rules are in `rules.rs`.
//!
//! Definitions, exactly as computed:
//! - An *interruption* is a run of a job that ended failed, node_fail or requeued (not
//!   completed, cancelled or timed out: those ended as asked).
//! - Its *cause* is the first rule of [`rules::attribute`] that holds for the evidence on
//!   the run's nodes from 15 minutes before its end (never before the run started) to 5
//!   minutes after; each piece of evidence explains one interruption at most, the earliest.
//! - *MTBI* of a job size: wall hours of runs of jobs of that size inside the period,
//!   divided by their interruptions in it. *Per 1,000 GPUs*: GPU-hours of all runs in the
//!   period / 1,000 / interruptions, the hours between interruptions of a 1,000-GPU job.
//! - *MTTR* of a node: the mean length of its out-of-service spans (drained, down, not
//!   responding, maintenance) that ended in the period.

pub mod ledger;
pub mod lemons;
pub mod recent;
pub mod rules;

pub use recent::Recent;

/// Words for a counter step's kind.
pub(crate) fn evidence_label(kind: &str) -> &str {
    match kind {
        crate::live::EVIDENCE_ECC_DBE => "double-bit ECC step",
        crate::live::EVIDENCE_IB_LINK_DOWN => "InfiniBand link down",
        other => other,
    }
}

use std::collections::{BTreeMap, HashMap};

use app::model::{Inventory, Job, JobState, UnixMs};
use app::reliability::{
    Cause, CauseCount, GroupCauses, Interruption, NodeRepair, Reliability, SizeRate, MAX_LISTED,
    SIZE_BUCKETS,
};
use app::reports::{GroupBy, ReportQuery};

use crate::store::{EvidenceRow, JobEvent, NodeEventRow, Store, StoreError, XidRow};

/// How far before the period runs and node spans are looked for (a longer run or outage
/// that started earlier counts from this far back).
pub const LOOKBACK_MS: i64 = 14 * 86_400_000;

#[derive(Debug, thiserror::Error)]
pub enum ReliabilityError {
    /// The question is wrong: words for the user.
    #[error("{0}")]
    Query(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Everything the attribution reads, for a period (pure input).
#[derive(Clone, Debug, Default)]
pub struct History {
    pub events: Vec<JobEvent>,
    pub jobs: Vec<Job>,
    pub xids: Vec<XidRow>,
    pub steps: Vec<EvidenceRow>,
    pub node_events: Vec<NodeEventRow>,
    pub operator_requeues: Vec<(u64, UnixMs)>,
}

impl History {
    /// Reads what a period needs from the store.
    pub async fn load(
        store: &Store,
        from_ms: UnixMs,
        to_ms: UnixMs,
    ) -> Result<History, StoreError> {
        // Evidence from the lemons' trailing window before the period on.
        let (ev_from, ev_to) = (
            from_ms - lemons::WINDOW_MS - rules::BEFORE_MS,
            to_ms + rules::AFTER_MS,
        );
        let (events, jobs, xids, steps, node_events, operator_requeues) = tokio::try_join!(
            store.job_events_between(from_ms - LOOKBACK_MS, to_ms),
            store.jobs_with_events_between(from_ms - LOOKBACK_MS, to_ms),
            store.xids_between(ev_from, ev_to),
            store.evidence_between(ev_from, ev_to),
            store.node_events_with_reasons(from_ms - LOOKBACK_MS, ev_to),
            store.operator_requeues(ev_from - 10 * 60_000, ev_to),
        )?;
        Ok(History {
            events,
            jobs,
            xids,
            steps,
            node_events,
            operator_requeues,
        })
    }
}

/// Interruptions of `[from_ms, to_ms)` with their causes, oldest first.
pub fn interruptions(
    h: &History,
    inv: &Inventory,
    from_ms: UnixMs,
    to_ms: UnixMs,
) -> Vec<Interruption> {
    let jobs: HashMap<u64, &Job> = h.jobs.iter().map(|j| (j.id, j)).collect();
    // Each run's start: the running transition before its end (events are by job, then time).
    let mut ends: Vec<(&JobEvent, Option<UnixMs>)> = Vec::new();
    let mut open: HashMap<u64, UnixMs> = HashMap::new();
    for e in &h.events {
        match e.state {
            JobState::Running => {
                open.entry(e.job_id).or_insert(e.at_ms);
            }
            s if s.is_finished() || s == JobState::Requeued => {
                let start = open.remove(&e.job_id);
                let interrupted = matches!(
                    s,
                    JobState::Failed | JobState::NodeFail | JobState::Requeued
                );
                if interrupted && e.at_ms >= from_ms && e.at_ms < to_ms {
                    ends.push((e, start));
                }
            }
            _ => {}
        }
    }
    ends.sort_by_key(|(e, _)| (e.at_ms, e.job_id));
    let by_node = |n: &str| n.to_string();
    let mut xids: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, x) in h.xids.iter().enumerate() {
        xids.entry(by_node(&x.node)).or_default().push(k);
    }
    let mut steps: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, s) in h.steps.iter().enumerate() {
        steps.entry(by_node(&s.node)).or_default().push(k);
    }
    let mut downs: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, e) in h.node_events.iter().enumerate() {
        downs.entry(by_node(&e.node)).or_default().push(k);
    }
    let mut claimed_xids = vec![false; h.xids.len()];
    let mut claimed_steps = vec![false; h.steps.len()];
    let mut claimed_nodes = vec![false; h.node_events.len()];
    let node_info: HashMap<&str, &app::model::Node> =
        inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut out = Vec::with_capacity(ends.len());
    for (e, start) in ends {
        let lo = (e.at_ms - rules::BEFORE_MS).max(start.unwrap_or(i64::MIN));
        let hi = e.at_ms + rules::AFTER_MS;
        let within = |t: UnixMs| t >= lo && t <= hi;
        let mut near = rules::Near::default();
        for n in &e.nodes {
            for &k in xids.get(n).into_iter().flatten() {
                if !claimed_xids[k] && within(h.xids[k].at_ms) {
                    near.xids.push((k, &h.xids[k]));
                }
            }
            for &k in steps.get(n).into_iter().flatten() {
                if !claimed_steps[k] && within(h.steps[k].at_ms) {
                    near.steps.push((k, &h.steps[k]));
                }
            }
            for &k in downs.get(n).into_iter().flatten() {
                if !claimed_nodes[k] && within(h.node_events[k].at_ms) {
                    near.node_events.push((k, &h.node_events[k]));
                }
            }
        }
        let by_operator = e.state == JobState::Requeued
            && h.operator_requeues
                .iter()
                .any(|(id, t)| *id == e.job_id && *t >= e.at_ms - 10 * 60_000 && *t <= hi);
        let run = rules::RunEnd {
            job_id: e.job_id,
            at_ms: e.at_ms,
            run_start_ms: start,
            state: e.state,
            nodes: &e.nodes,
            detail: &e.detail,
            by_operator,
        };
        let f = rules::attribute(&run, &near);
        match f.claims {
            Some(("xid", k)) => claimed_xids[k] = true,
            Some(("step", k)) => claimed_steps[k] = true,
            Some(("node", k)) => claimed_nodes[k] = true,
            _ => {}
        }
        let job = jobs.get(&e.job_id);
        let place = f.node.as_deref().or(e.nodes.first().map(String::as_str));
        let info = place.and_then(|n| node_info.get(n));
        out.push(Interruption {
            job_id: e.job_id,
            job_name: job.map(|j| j.name.clone()).unwrap_or_default(),
            account: job.map(|j| j.account.clone()).unwrap_or_default(),
            user: job.map(|j| j.user.clone()).unwrap_or_default(),
            at_ms: e.at_ms,
            run_start_ms: start,
            gpus: job.map_or(0, |j| j.gpus),
            state: e.state.label().to_string(),
            cause: f.cause,
            rack: info.map(|n| n.rack.clone()),
            gpu_model: info
                .and_then(|n| n.gpus.first())
                .map(|g| g.model.clone())
                .filter(|m| !m.is_empty()),
            node: f.node,
            evidence: f.evidence,
        });
    }
    out
}

/// The interruptions of `[from_ms, to_ms)`, and (first) those of the lemons' window
/// before it, attributed in one pass so that evidence is claimed by the earliest.
pub fn with_window(
    h: &History,
    inv: &Inventory,
    from_ms: UnixMs,
    to_ms: UnixMs,
) -> (Vec<Interruption>, Vec<Interruption>) {
    let all = interruptions(h, inv, from_ms - lemons::WINDOW_MS, to_ms);
    let period = all.iter().filter(|i| i.at_ms >= from_ms).cloned().collect();
    (period, all)
}

/// Counts by cause in the order of [`Cause::ALL`].
fn counts<'a>(it: impl Iterator<Item = &'a Interruption>) -> Vec<u32> {
    let mut c = vec![0u32; Cause::ALL.len()];
    for i in it {
        if let Some(k) = Cause::ALL.iter().position(|x| *x == i.cause) {
            c[k] += 1;
        }
    }
    c
}

fn grouped(list: &[Interruption], key: impl Fn(&Interruption) -> String) -> Vec<GroupCauses> {
    let mut groups: BTreeMap<String, Vec<&Interruption>> = BTreeMap::new();
    for i in list {
        groups.entry(key(i)).or_default().push(i);
    }
    let mut rows: Vec<GroupCauses> = groups
        .into_iter()
        .map(|(group, v)| GroupCauses {
            group,
            total: v.len() as u32,
            counts: counts(v.into_iter()),
        })
        .collect();
    rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.group.cmp(&b.group)));
    rows
}

/// Which size bucket `gpus` falls in.
fn bucket_of(gpus: u32) -> usize {
    SIZE_BUCKETS.iter().rposition(|&lo| gpus >= lo).unwrap_or(0)
}

/// Runs inside the period by job size, their interruptions, and MTBI.
fn rates(
    h: &History,
    list: &[Interruption],
    from_ms: UnixMs,
    to_ms: UnixMs,
    now_ms: UnixMs,
) -> (Vec<SizeRate>, f64) {
    let gpus: HashMap<u64, u32> = h.jobs.iter().map(|j| (j.id, j.gpus)).collect();
    let mut rows: Vec<SizeRate> = SIZE_BUCKETS
        .iter()
        .enumerate()
        .map(|(k, &lo)| SizeRate {
            gpus_from: lo,
            gpus_to: SIZE_BUCKETS.get(k + 1).map_or(u32::MAX, |n| n - 1),
            ..SizeRate::default()
        })
        .collect();
    let end_of_open = to_ms.min(now_ms);
    let mut gpu_hours = 0.0;
    for r in crate::timeline::runs(&h.events) {
        let (a, b) = (
            r.start_ms.max(from_ms),
            r.end_ms.unwrap_or(end_of_open).min(to_ms),
        );
        if b <= a {
            continue;
        }
        let g = gpus.get(&r.job_id).copied().unwrap_or(0);
        if g == 0 {
            continue;
        }
        let hours = (b - a) as f64 / 3_600_000.0;
        let row = &mut rows[bucket_of(g)];
        row.runs += 1;
        row.run_hours += hours;
        row.gpu_hours += hours * f64::from(g);
        gpu_hours += hours * f64::from(g);
    }
    for i in list.iter().filter(|i| i.gpus > 0) {
        rows[bucket_of(i.gpus)].interruptions += 1;
    }
    for r in &mut rows {
        r.mtbi_hours = (r.interruptions > 0).then(|| r.run_hours / f64::from(r.interruptions));
    }
    rows.retain(|r| r.runs > 0 || r.interruptions > 0);
    (rows, gpu_hours)
}

/// Out-of-service spans per node in the period, and the mean time to repair.
fn repairs(h: &History, from_ms: UnixMs, to_ms: UnixMs, now_ms: UnixMs) -> Vec<NodeRepair> {
    let end = to_ms.min(now_ms);
    let mut rows: Vec<NodeRepair> = Vec::new();
    for (node, spans) in lemons::spans(h) {
        let (mut n, mut hours, mut repaired) = (0u32, 0.0, 0.0);
        for (s, e) in spans {
            let (a, b) = (s.max(from_ms), e.map_or(end, |e| e.min(to_ms)));
            if b <= a {
                continue;
            }
            hours += (b - a) as f64 / 3_600_000.0;
            if let Some(e) = e.filter(|e| *e >= from_ms && *e < to_ms) {
                n += 1;
                repaired += (e - s) as f64 / 3_600_000.0;
            }
        }
        if hours > 0.0 {
            rows.push(NodeRepair {
                node: node.to_string(),
                repairs: n,
                out_of_service_hours: hours,
                mttr_hours: (n > 0).then(|| repaired / f64::from(n)),
            });
        }
    }
    rows.sort_by(|a, b| {
        b.out_of_service_hours
            .total_cmp(&a.out_of_service_hours)
            .then_with(|| a.node.cmp(&b.node))
    });
    rows
}

/// The page's answer for `q` from history `h` (pure).
pub fn assemble(
    h: &History,
    inv: &Inventory,
    q: &ReportQuery,
    from_ms: UnixMs,
    to_ms: UnixMs,
    now_ms: UnixMs,
) -> Reliability {
    let (list, all) = with_window(h, inv, from_ms, to_ms);
    let lemons = lemons::rank(h, inv, &all, from_ms, to_ms, now_ms);
    let total = list.len() as u32;
    let all = counts(list.iter());
    let by_cause = Cause::ALL
        .iter()
        .zip(&all)
        .map(|(c, n)| CauseCount {
            cause: *c,
            count: *n,
            share: if total > 0 {
                f64::from(*n) / f64::from(total)
            } else {
                0.0
            },
        })
        .collect();
    let unexpected = list.iter().filter(|i| i.cause.is_unexpected()).count() as u32;
    let domain_of: HashMap<&str, &str> = inv
        .nodes
        .iter()
        .filter_map(|n| n.domains.first().map(|d| (n.name.as_str(), d.as_str())))
        .collect();
    let hall_of = inv.hall_of_rack();
    let unknown = || "(unknown)".to_string();
    let by_group = grouped(&list, |i| match q.group {
        GroupBy::Account => i.account.clone(),
        GroupBy::User => i.user.clone(),
        GroupBy::Partition => h
            .jobs
            .iter()
            .find(|j| j.id == i.job_id)
            .map_or_else(unknown, |j| j.partition.clone()),
        GroupBy::Rack => i.rack.clone().unwrap_or_else(unknown),
        GroupBy::Hall => i
            .rack
            .as_deref()
            .and_then(|r| hall_of.get(r))
            .map_or_else(unknown, |h| h.to_string()),
        GroupBy::Domain => i
            .node
            .as_deref()
            .and_then(|n| domain_of.get(n))
            .map_or_else(unknown, |d| d.to_string()),
    });
    let by_gpu_model = grouped(&list, |i| i.gpu_model.clone().unwrap_or_else(unknown));
    let by_node = grouped(
        &list
            .iter()
            .filter(|i| i.node.is_some())
            .cloned()
            .collect::<Vec<_>>(),
        |i| i.node.clone().unwrap_or_default(),
    );
    let (by_size, run_gpu_hours) = rates(h, &list, from_ms, to_ms, now_ms);
    let mut newest = list;
    newest.reverse();
    newest.truncate(MAX_LISTED);
    Reliability {
        query: q.clone(),
        from_ms,
        to_ms,
        now_ms,
        by_cause,
        unexpected,
        by_group,
        by_gpu_model,
        by_node,
        by_size,
        mtbi_hours_per_1000_gpus: (total > 0).then(|| run_gpu_hours / 1000.0 / f64::from(total)),
        run_gpu_hours,
        repairs: repairs(h, from_ms, to_ms, now_ms),
        lemons,
        radar: Vec::new(),
        interruptions: newest,
        total,
        ledger: app::reliability::Ledger::default(),
        charts: Vec::new(),
        coverage: Default::default(),
    }
}

/// The longest period the page answers for (the raw history it reads is bounded).
pub const MAX_DAYS: i64 = 92;

/// The period `q` asks for at `now_ms`, at most [`MAX_DAYS`] long.
pub fn window(q: &ReportQuery, now_ms: UnixMs) -> Result<(UnixMs, UnixMs), ReliabilityError> {
    let (from_ms, to_ms) = q.window(now_ms).map_err(ReliabilityError::Query)?;
    if to_ms - from_ms > MAX_DAYS * 86_400_000 {
        return Err(ReliabilityError::Query(format!(
            "a reliability period is at most {MAX_DAYS} days"
        )));
    }
    Ok((from_ms, to_ms))
}

/// `/reliability`'s answer for `q` at `now_ms`.
pub async fn build(
    store: &Store,
    inv: &Inventory,
    q: &ReportQuery,
    now_ms: UnixMs,
) -> Result<(Reliability, History, Vec<app::reliability::LedgerRow>), ReliabilityError> {
    let (from_ms, to_ms) = window(q, now_ms)?;
    // Independent reads: the ledger's rollups while the history loads.
    let (h, (mut ledger, mut jobs)) = tokio::try_join!(
        History::load(store, from_ms, to_ms),
        ledger::load(store, from_ms, to_ms),
    )?;
    ledger::name_jobs(&mut ledger, &mut jobs, &h.jobs);
    let mut r = assemble(&h, inv, q, from_ms, to_ms, now_ms);
    r.ledger = ledger;
    Ok((r, h, jobs))
}

/// One table of an answer as CSV (`table`: causes, groups, models, nodes, sizes, repairs,
/// lemons, interruptions, ledger, ledger_accounts, ledger_jobs); `None` for an unknown
/// table. The interruptions and ledger_jobs tables have every one of the period (`all`,
/// `jobs`), not only the page's.
pub fn csv(
    r: &Reliability,
    all: &[Interruption],
    jobs: &[app::reliability::LedgerRow],
    table: &str,
) -> Option<String> {
    use app::units::csv_field;
    if let Some(t) = ledger::csv(&r.ledger, jobs, table) {
        return Some(t);
    }
    let mut out = String::new();
    let causes_header = |out: &mut String, first: &str| {
        out.push_str(first);
        out.push_str(",total");
        for c in Cause::ALL {
            out.push(',');
            out.push_str(c.as_str());
        }
        out.push('\n');
    };
    let group_rows = |out: &mut String, rows: &[GroupCauses]| {
        for g in rows {
            out.push_str(&csv_field(&g.group));
            out.push_str(&format!(",{}", g.total));
            for n in &g.counts {
                out.push_str(&format!(",{n}"));
            }
            out.push('\n');
        }
    };
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    match table {
        "causes" => {
            out.push_str("cause,count,share\n");
            for c in &r.by_cause {
                out.push_str(&format!(
                    "{},{},{:.4}\n",
                    c.cause.as_str(),
                    c.count,
                    c.share
                ));
            }
        }
        "groups" => {
            causes_header(&mut out, r.query.group.as_str());
            group_rows(&mut out, &r.by_group);
        }
        "models" => {
            causes_header(&mut out, "gpu_model");
            group_rows(&mut out, &r.by_gpu_model);
        }
        "nodes" => {
            causes_header(&mut out, "node");
            group_rows(&mut out, &r.by_node);
        }
        "sizes" => {
            out.push_str("gpus_from,gpus_to,runs,run_hours,gpu_hours,interruptions,mtbi_hours\n");
            for s in &r.by_size {
                out.push_str(&format!(
                    "{},{},{},{:.3},{:.3},{},{}\n",
                    s.gpus_from,
                    s.gpus_to,
                    s.runs,
                    s.run_hours,
                    s.gpu_hours,
                    s.interruptions,
                    opt(s.mtbi_hours)
                ));
            }
        }
        "repairs" => {
            out.push_str("node,repairs,out_of_service_hours,mttr_hours\n");
            for n in &r.repairs {
                out.push_str(&format!(
                    "{},{},{:.3},{}\n",
                    csv_field(&n.node),
                    n.repairs,
                    n.out_of_service_hours,
                    opt(n.mttr_hours)
                ));
            }
        }
        "lemons" => {
            out.push_str("node,rack,score,recent_score,rma,jobs_taken_down,hardware_xids,counter_steps,outages,out_of_service_hours,evidence\n");
            for l in &r.lemons {
                out.push_str(&format!(
                    "{},{},{:.2},{:.2},{},{},{},{},{},{:.3},{}\n",
                    csv_field(&l.node),
                    csv_field(l.rack.as_deref().unwrap_or("")),
                    l.score,
                    l.recent_score,
                    l.rma,
                    l.jobs_taken_down,
                    l.hardware_xids,
                    l.counter_steps,
                    l.outages,
                    l.out_of_service_hours,
                    csv_field(&l.evidence)
                ));
            }
        }
        "interruptions" => {
            out.push_str("at,at_ms,job_id,job_name,account,user,gpus,state,cause,node,rack,gpu_model,evidence\n");
            for i in all {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    app::units::utc(i.at_ms),
                    i.at_ms,
                    i.job_id,
                    csv_field(&i.job_name),
                    csv_field(&i.account),
                    csv_field(&i.user),
                    i.gpus,
                    i.state,
                    i.cause.as_str(),
                    csv_field(i.node.as_deref().unwrap_or("")),
                    csv_field(i.rack.as_deref().unwrap_or("")),
                    csv_field(i.gpu_model.as_deref().unwrap_or("")),
                    csv_field(&i.evidence)
                ));
            }
        }
        _ => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests;
