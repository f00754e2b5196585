//! Incidents: the open alerts grouped by the failure that causes them, along the physical
//! and logical tree. Pure: open alerts, the inventory, the scrape targets and the
//! scheduler's jobs in; incidents out, critical first.
//!
//! - A node not responding holds every alert about the node, its GPUs and its exporters.
//! - A rack's power shelf down, coolant leak or NVLink switch tray down holds the rack's
//!   other alerts and its nodes' thermal throttling (a power brake, hot air).
//! - Otherwise a node's alerts (its GPUs', its exporters') are one incident, its cause the
//!   alert first in [`NODE_CAUSES`] (a GPU's XID holds its double-bit ECC alert), and a
//!   job's alerts (NCCL latency, checkpoints, stragglers, a hang) are one.
//! - Anything else is an incident of its own.

use std::collections::{BTreeMap, HashMap};

use app::model::{Inventory, JobState, UnixMs};
use app::views::{AlertItem, Incident, IncidentJob};

use crate::scheduler::SchedJob;
use crate::telemetry::scrape::TargetHealth;

/// Rack-wide failures, in the order one is taken as the cause.
const RACK_CAUSES: [&str; 4] = [
    "power_shelf_down",
    "coolant_leak",
    "nvlink_switch_tray_down",
    "coolant_leak_warning",
];

/// A node's alerts, in the order one is taken as the cause.
const NODE_CAUSES: [&str; 9] = [
    "node_not_responding",
    "xid",
    "ecc_double_bit",
    "remapped_rows",
    "nvswitch_fatal",
    "thermal_throttling",
    "pcie_replays",
    "nvswitch_hot",
    "target_down",
];

/// Where an alert is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Node(String),
    Rack(String),
    Job(u64),
    Alone(i64),
}

/// What the grouping reads besides the alerts.
pub struct Context<'a> {
    pub inventory: Option<&'a Inventory>,
    pub targets: &'a [TargetHealth],
    pub jobs: &'a [SchedJob],
    /// Per job: when its newest complete checkpoint finished.
    pub last_checkpoint_ms: &'a HashMap<u64, UnixMs>,
    pub now_ms: UnixMs,
}

fn rank(severity: &str) -> u8 {
    match severity {
        "critical" => 0,
        "warning" => 1,
        _ => 2,
    }
}

/// The open alerts `open` as incidents.
pub fn group(open: Vec<AlertItem>, cx: &Context<'_>) -> Vec<Incident> {
    if open.is_empty() {
        return Vec::new();
    }
    let rack_of: HashMap<&str, &str> = cx
        .inventory
        .map(|inv| {
            inv.nodes
                .iter()
                .map(|n| (n.name.as_str(), n.rack.as_str()))
                .collect()
        })
        .unwrap_or_default();
    // Indexed once: a fleet has thousands of incidents and tens of thousands of nodes.
    let mut nodes_of_rack: HashMap<&str, Vec<&str>> = HashMap::new();
    for (n, r) in &rack_of {
        nodes_of_rack.entry(r).or_default().push(n);
    }
    let mut jobs_of_node: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, j) in cx.jobs.iter().enumerate() {
        if j.job.state == JobState::Running {
            for n in &j.job.nodes {
                jobs_of_node.entry(n.as_str()).or_default().push(i);
            }
        }
    }
    let ix = Index {
        rack_of: &rack_of,
        nodes_of_rack: &nodes_of_rack,
        jobs_of_node: &jobs_of_node,
    };
    let target_of: HashMap<&str, &str> = cx
        .targets
        .iter()
        .filter_map(|t| Some((t.url.as_str(), t.of.as_deref()?)))
        .collect();
    let place = |a: &AlertItem| -> Place {
        let mut parts = a.subject.splitn(2, ':');
        let (kind, rest) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let first = rest.split(':').next().unwrap_or("");
        match kind {
            "node" => Place::Node(first.to_string()),
            "rack" => Place::Rack(first.to_string()),
            "job" => first.parse().map(Place::Job).unwrap_or(Place::Alone(a.id)),
            "target" => match target_of.get(rest).and_then(|o| o.split_once(':')) {
                Some(("node", n)) => Place::Node(n.to_string()),
                Some(("rack", r)) => Place::Rack(r.to_string()),
                _ => Place::Alone(a.id),
            },
            _ => Place::Alone(a.id),
        }
    };
    let mut places: BTreeMap<Place, Vec<AlertItem>> = BTreeMap::new();
    for a in open.into_iter().filter(|a| a.state == "firing") {
        places.entry(place(&a)).or_default().push(a);
    }
    // Racks with a rack-wide failure take their nodes' throttling (unless the node is not
    // responding: that is its own failure).
    let failing_racks: Vec<String> = places
        .iter()
        .filter_map(|(p, v)| match p {
            Place::Rack(r) if v.iter().any(|a| RACK_CAUSES.contains(&a.rule.as_str())) => {
                Some(r.clone())
            }
            _ => None,
        })
        .collect();
    for rack in &failing_racks {
        let mut moved = Vec::new();
        for (p, v) in places.iter_mut() {
            let Place::Node(n) = p else { continue };
            if rack_of.get(n.as_str()) != Some(&rack.as_str())
                || v.iter().any(|a| a.rule == "node_not_responding")
            {
                continue;
            }
            let (held, rest): (Vec<_>, Vec<_>) = std::mem::take(v)
                .into_iter()
                .partition(|a| a.rule == "thermal_throttling");
            *v = rest;
            moved.extend(held);
        }
        places
            .entry(Place::Rack(rack.clone()))
            .or_default()
            .extend(moved);
    }
    let mut out: Vec<Incident> = places
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(p, alerts)| incident(p, alerts, cx, &ix))
        .collect();
    out.sort_by(|a, b| {
        (
            rank(&a.severity),
            a.acked,
            std::cmp::Reverse(a.started_ms),
            a.id,
        )
            .cmp(&(
                rank(&b.severity),
                b.acked,
                std::cmp::Reverse(b.started_ms),
                b.id,
            ))
    });
    out
}

/// The cause among `alerts` at `p`: the first in its place's order of causes, else the
/// worst and oldest.
fn cause_index(p: &Place, alerts: &[AlertItem]) -> usize {
    let order: &[&str] = match p {
        Place::Rack(_) => &RACK_CAUSES,
        Place::Node(_) => &NODE_CAUSES,
        _ => &["job_hung"],
    };
    let by_order = order
        .iter()
        .find_map(|r| alerts.iter().position(|a| a.rule == *r));
    by_order.unwrap_or_else(|| {
        (0..alerts.len())
            .min_by_key(|&i| {
                (
                    rank(&alerts[i].severity),
                    alerts[i].started_ms,
                    alerts[i].id,
                )
            })
            .unwrap_or(0)
    })
}

/// The inventory and the running jobs, indexed by node and rack for [`incident`].
struct Index<'a> {
    rack_of: &'a HashMap<&'a str, &'a str>,
    nodes_of_rack: &'a HashMap<&'a str, Vec<&'a str>>,
    /// Per node, its running jobs' positions in `Context::jobs`.
    jobs_of_node: &'a HashMap<&'a str, Vec<usize>>,
}

fn incident(p: Place, mut alerts: Vec<AlertItem>, cx: &Context<'_>, ix: &Index<'_>) -> Incident {
    let rack_of = ix.rack_of;
    alerts.sort_by_key(|a| (rank(&a.severity), a.started_ms, a.id));
    let cause = alerts.remove(cause_index(&p, &alerts));
    let severity = std::iter::once(&cause)
        .chain(&alerts)
        .map(|a| a.severity.as_str())
        .min_by_key(|s| rank(s))
        .unwrap_or("info")
        .to_string();
    let started_ms = std::iter::once(&cause)
        .chain(&alerts)
        .map(|a| a.started_ms)
        .min()
        .unwrap_or(cause.started_ms);
    let running = || cx.jobs.iter().filter(|j| j.job.state == JobState::Running);
    let (place, place_link, mut nodes, racks) = match &p {
        Place::Node(n) => (
            format!("node {n}"),
            app::units::node_href(n),
            vec![n.clone()],
            rack_of
                .get(n.as_str())
                .map(|r| r.to_string())
                .into_iter()
                .collect(),
        ),
        Place::Rack(r) => (
            format!("rack {r}"),
            "/racks".to_string(),
            ix.nodes_of_rack
                .get(r.as_str())
                .map(|v| v.iter().map(|n| n.to_string()).collect())
                .unwrap_or_default(),
            vec![r.clone()],
        ),
        Place::Job(id) => (
            format!("job {id}"),
            format!("/jobs/{id}"),
            running()
                .find(|j| j.job.id == *id)
                .map(|j| j.job.nodes.clone())
                .unwrap_or_default(),
            Vec::new(),
        ),
        Place::Alone(_) => (
            cause.subject.clone(),
            cause.link.clone(),
            Vec::new(),
            Vec::new(),
        ),
    };
    nodes.sort();
    // The running jobs on its nodes (or the job itself), in the scheduler's order.
    let hit: Vec<&SchedJob> = match &p {
        Place::Job(id) => running().filter(|j| j.job.id == *id).collect(),
        _ => {
            let at: std::collections::BTreeSet<usize> = nodes
                .iter()
                .filter_map(|n| ix.jobs_of_node.get(n.as_str()))
                .flatten()
                .copied()
                .collect();
            at.into_iter().map(|i| &cx.jobs[i]).collect()
        }
    };
    let jobs = hit
        .into_iter()
        .map(|j| {
            let last = cx.last_checkpoint_ms.get(&j.job.id).copied();
            let since = last.or(j.job.start_ms).unwrap_or(cx.now_ms);
            IncidentJob {
                id: j.job.id,
                name: j.job.name.clone(),
                user: j.job.user.clone(),
                account: j.job.account.clone(),
                gpus: j.job.gpus,
                last_checkpoint_ms: last,
                at_risk_gpu_hours: at_risk(j.job.gpus, since, cx.now_ms),
            }
        })
        .collect::<Vec<_>>();
    let action = action(&cause, &place, &jobs);
    Incident {
        id: cause.id,
        acked: cause.acked_by.is_some(),
        cause,
        severity,
        started_ms,
        alerts,
        place,
        place_link,
        nodes,
        racks,
        jobs,
        action,
        remedy: None,
    }
}

/// The open incidents now, from the store's open alerts and what `live` knows.
pub async fn open(
    store: &crate::store::Store,
    live: &crate::live::Live,
) -> Result<Vec<Incident>, crate::store::StoreError> {
    let alerts = store.open_alerts().await?;
    let inventory = live.inventory();
    let targets = live.targets();
    let sched = live.sched();
    let jobs: &[SchedJob] = sched.as_ref().map(|s| s.jobs.as_slice()).unwrap_or(&[]);
    let now_ms = live.source_now();
    let mut incidents = group(
        alerts,
        &Context {
            inventory: inventory.as_deref(),
            targets: &targets,
            jobs,
            last_checkpoint_ms: &HashMap::new(),
            now_ms,
        },
    );
    // What the policies did, would do or recommend: the newest decision on each.
    let ids: Vec<i64> = incidents.iter().map(|i| i.id).collect();
    let mut decisions = store.decisions_on(&ids).await?;
    for i in incidents.iter_mut() {
        if let Some(k) = decisions.iter().position(|d| d.incident == i.id) {
            i.remedy = Some(decisions.remove(k));
        }
    }
    // The checkpoints of the jobs hit only, once they are known.
    let hit: Vec<u64> = incidents
        .iter()
        .flat_map(|i| i.jobs.iter().map(|j| j.id))
        .collect();
    if hit.is_empty() {
        return Ok(incidents);
    }
    let mut last = store.last_checkpoint_ends(&hit).await?;
    with_noted(&mut last, live.last_checkpoints(), |_| true);
    for j in incidents.iter_mut().flat_map(|i| i.jobs.iter_mut()) {
        if let Some(&t) = last.get(&j.id) {
            j.last_checkpoint_ms = Some(t);
            j.at_risk_gpu_hours = at_risk(j.gpus, t, now_ms);
        }
    }
    Ok(incidents)
}

/// `stored` with the checkpoints `noted` in memory (the store writer may lag behind the
/// source) for the jobs `keep` takes: the newer of the two.
pub fn with_noted(
    stored: &mut HashMap<u64, UnixMs>,
    noted: HashMap<u64, UnixMs>,
    keep: impl Fn(u64) -> bool,
) {
    for (job, end) in noted.into_iter().filter(|(j, _)| keep(*j)) {
        let e = stored.entry(job).or_insert(end);
        *e = (*e).max(end);
    }
}

/// GPU-hours of `gpus` since `since_ms`: what a failure at `now_ms` throws away.
fn at_risk(gpus: u32, since_ms: UnixMs, now_ms: UnixMs) -> f64 {
    f64::from(gpus) * (now_ms - since_ms).max(0) as f64 / 3_600_000.0
}

/// What to do about an incident caused by `cause`, in words.
fn action(cause: &AlertItem, place: &str, jobs: &[IncidentJob]) -> String {
    let requeue = if jobs.is_empty() {
        String::new()
    } else {
        format!(
            ", then requeue {} excluding it",
            if jobs.len() == 1 {
                format!("job {}", jobs[0].id)
            } else {
                format!("its {} jobs", jobs.len())
            }
        )
    };
    match cause.rule.as_str() {
        "xid" | "ecc_double_bit" | "remapped_rows" | "nvswitch_fatal" => {
            format!("Drain {place}: bad hardware{requeue}.")
        }
        "node_not_responding" => format!(
            "Check {place}'s power and BMC; resume it in Slurm once it answers and passes a health check."
        ),
        "target_down" => format!("Check the exporters of {place}: its readings are missing."),
        "thermal_throttling" => format!("Check the cooling of {place}: its GPUs slow down."),
        "pcie_replays" | "nvswitch_hot" => {
            format!("Plan maintenance of {place}: drain it when its jobs checkpoint.")
        }
        "coolant_leak" | "coolant_leak_warning" => {
            format!("Take {place} out of service: drain its nodes{requeue}, and isolate the leak.")
        }
        "power_shelf_down" => format!(
            "Replace the failed power shelf of {place}: it runs on a lowered power limit meanwhile."
        ),
        "nvlink_switch_tray_down" => format!(
            "Drain the compute trays of {place} cut off from the NVLink fabric{requeue}."
        ),
        "rack_power_over_limit" | "rack_power_high" => {
            format!("Move load off {place} or cap its GPUs' power.")
        }
        "inlet_over_limit" | "coolant_flow_low" | "coolant_delta_t_high" => {
            format!("Check the cooling of {place}.")
        }
        "job_hung" => format!("Requeue {place}: it has stopped making progress."),
        "straggler" => format!("Drain the straggling node of {place}, then requeue it excluding it."),
        "nccl_latency" => format!("Check the fabric of {place}'s nodes: collectives are slow."),
        "checkpoint_overdue" => format!("Check {place}'s checkpointing: work since its last save is at risk."),
        "gpus_idle" => match jobs {
            [j] => format!("Ask {} (the owner of {place}) to use its idle GPUs or release them (scancel, or a smaller allocation).", j.user),
            _ => format!("Ask the owner of {place} to use its idle GPUs or release them."),
        },
        "backfill_slow" => "Look at slurmctld's backfill (sdiag): shorten bf_max_job_test or bf_window, or find what floods the queue.".to_string(),
        "agent_queue_high" => "Look at slurmctld's agent queue (sdiag): nodes it cannot reach, or an RPC storm.".to_string(),
        _ => format!("Look at {place}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(id: i64, rule: &str, subject: &str, severity: &str, started_ms: UnixMs) -> AlertItem {
        AlertItem {
            id,
            rule: rule.into(),
            subject: subject.into(),
            severity: severity.into(),
            summary: format!("{rule} on {subject}"),
            link: String::new(),
            state: "firing".into(),
            started_ms,
            resolved_ms: None,
            acked_by: None,
            acked_ms: None,
            ack_note: None,
            silenced_until_ms: None,
            silenced_by: None,
            silence_note: None,
            flaps: 0,
            no_data_since_ms: None,
        }
    }

    fn job(id: u64, nodes: &[&str], gpus: u32, start_ms: UnixMs) -> SchedJob {
        SchedJob {
            job: app::model::Job {
                id,
                name: format!("train-{id}"),
                user: "u".into(),
                account: "a".into(),
                partition: "p".into(),
                state: JobState::Running,
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
                gpus,
                submit_ms: 0,
                start_ms: Some(start_ms),
                end_ms: None,
            },
            raw_state: vec!["RUNNING".into()],
            state_reason: None,
            restart_count: 0,
            exit_code: None,
            node_count: nodes.len() as u32,
            segment_size: None,
            excluded: Vec::new(),
            queue: Default::default(),
        }
    }

    #[test]
    fn one_incident_per_failure_along_the_tree() {
        let inv = crate::sim::layout(16, "t");
        let rack0 = inv.nodes[0].rack.clone();
        let in_rack0: Vec<&str> = inv
            .nodes
            .iter()
            .filter(|n| n.rack == rack0)
            .map(|n| n.name.as_str())
            .collect();
        let other = inv
            .nodes
            .iter()
            .find(|n| n.rack != rack0)
            .map(|n| n.name.clone())
            .expect("a second rack");
        let targets = vec![
            TargetHealth::of("http://e/dcgm/x", format!("node:{other}")),
            TargetHealth::of("http://e/ipmi/x", format!("node:{other}")),
        ];
        let open = vec![
            // A node down and its two exporters: one incident.
            alert(1, "target_down", "target:http://e/dcgm/x", "warning", 10),
            alert(2, "target_down", "target:http://e/ipmi/x", "warning", 11),
            alert(
                3,
                "node_not_responding",
                &format!("node:{other}"),
                "warning",
                12,
            ),
            // A GPU's XID and the node's double-bit ECC: one, the XID its cause.
            alert(
                4,
                "ecc_double_bit",
                &format!("node:{}", in_rack0[1]),
                "critical",
                20,
            ),
            alert(
                5,
                "xid",
                &format!("node:{}:gpu3", in_rack0[1]),
                "critical",
                21,
            ),
            // A power shelf down: the rack over its limit and a node's power brake.
            alert(
                6,
                "rack_power_over_limit",
                &format!("rack:{rack0}"),
                "critical",
                30,
            ),
            alert(
                7,
                "power_shelf_down",
                &format!("rack:{rack0}"),
                "critical",
                31,
            ),
            alert(
                8,
                "thermal_throttling",
                &format!("node:{}", in_rack0[2]),
                "warning",
                32,
            ),
            // A job's slow collectives, on its own.
            alert(9, "nccl_latency", "job:77", "warning", 40),
        ];
        let jobs = vec![job(77, &[in_rack0[1], in_rack0[2]], 16, 0)];
        let last = HashMap::from([(77, 3_600_000)]);
        let cx = Context {
            inventory: Some(&inv),
            targets: &targets,
            jobs: &jobs,
            last_checkpoint_ms: &last,
            now_ms: 2 * 3_600_000,
        };
        let got = group(open, &cx);
        let summary: Vec<(i64, &str, Vec<i64>)> = got
            .iter()
            .map(|i| {
                (
                    i.id,
                    i.severity.as_str(),
                    i.alerts.iter().map(|a| a.id).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                // Critical first, newest first: the shelf (its rack's alerts, the brake)...
                (7, "critical", vec![6, 8]),
                // ...then the XID holding the ECC alert.
                (5, "critical", vec![4]),
                // Warnings: the job, then the node down with its exporters.
                (9, "warning", vec![]),
                (3, "warning", vec![1, 2]),
            ]
        );
        let xid = &got[1];
        assert_eq!(xid.place, format!("node {}", in_rack0[1]));
        assert_eq!(xid.racks, std::slice::from_ref(&rack0));
        assert_eq!(xid.jobs.len(), 1);
        // 16 GPUs, an hour since the last checkpoint.
        assert!((xid.jobs[0].at_risk_gpu_hours - 16.0).abs() < 1e-9);
        assert!(xid.action.starts_with("Drain node"), "{}", xid.action);
        assert!(xid.action.contains("requeue job 77"), "{}", xid.action);
        assert_eq!(got[0].nodes.len(), in_rack0.len());
        // Acknowledged incidents sink below the others of their severity.
        let mut open2 = vec![
            alert(1, "xid", "node:a:gpu0", "critical", 10),
            alert(2, "xid", "node:b:gpu0", "critical", 5),
        ];
        open2[0].acked_by = Some("op".into());
        let got = group(open2, &cx);
        assert_eq!(got.iter().map(|i| i.id).collect::<Vec<_>>(), [2, 1]);
    }
}
