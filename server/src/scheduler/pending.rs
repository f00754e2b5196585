//! Why each pending job waits: Slurm's reason code put in one [`WaitKind`], and the evidence
//! from the same poll (free nodes and GPUs against what the job asks, the largest free
//! group in one rack, the jobs of higher priority ahead, a limit's use now, the nodes that
//! are down or drained). Pure: computed once per poll (`Live::set_sched`),
//! never per browser.

use std::collections::HashMap;

use app::model::{JobState, NodeState};
use app::queue::{Wait, WaitKind};

use super::{SchedJob, SchedNode};

/// The category of one of Slurm's reason codes, or `None` for a code Gantry does not know.
/// Slurm 22.05 writes `ReqNodeNotAvail, UnavailableNodes:…` in some answers: the code is
/// the part before the comma.
pub fn kind_of(reason: &str) -> Option<WaitKind> {
    let code = code_of(reason);
    let k = match code {
        "None" | "Prolog" | "Cleaning" | "Configuring" => WaitKind::Starting,
        "Priority" => WaitKind::Priority,
        "Dependency" | "DependencyNeverSatisfied" => WaitKind::Dependency,
        "Resources"
        | "NvidiaImexChannels"
        | "Licenses"
        | "BurstBufferResources"
        | "BurstBufferStageIn"
        | "BurstBufferOperation"
        | "MpiPortsBusy"
        | "MaxPoweredUpNodes"
        | "PowerNotAvail"
        | "PowerReserved" => WaitKind::Resources,
        "JobHeldAdmin" | "JobHeldUser" | "BeginTime" | "JobHoldMaxRequeue" | "SchedDefer"
        | "FedJobLock" => WaitKind::Held,
        "PartitionDown" | "PartitionInactive" | "ReqNodeNotAvail" | "NodeDown" | "Reservation"
        | "ReservationDeleted" | "ReservationInvalid" | "FrontEndDown" | "BlockFreeAction"
        | "BlockMaxError" => WaitKind::Nodes,
        "SystemFailure" | "JobLaunchFailure" | "NonZeroExitCode" | "RaisedSignal" | "TimeLimit"
        | "InactiveLimit" | "OutOfMemory" | "DeadLine" => WaitKind::Failed,
        "PartitionNodeLimit"
        | "PartitionTimeLimit"
        | "PartitionConfig"
        | "AccountingPolicy"
        | "InvalidAccount"
        | "InvalidQOS"
        | "QOSNotAllowed"
        | "AccountNotAllowed"
        | "JobArrayTaskLimit"
        | "MaxMemPerLimit"
        | "BadConstraints"
        | "Constraints"
        | "QOSUsageThreshold"
        | "AssociationJobLimit"
        | "AssociationResourceLimit"
        | "AssociationTimeLimit" => WaitKind::Limit,
        // The limit families: QOS…, Assoc…, Max…PerAccount, Max…PerUser.
        c if c.starts_with("QOS") || c.starts_with("Assoc") => WaitKind::Limit,
        c if c.starts_with("Max") && (c.ends_with("PerAccount") || c.ends_with("PerUser")) => {
            WaitKind::Limit
        }
        _ => return None,
    };
    Some(k)
}

fn code_of(reason: &str) -> &str {
    reason.split(',').next().unwrap_or("").trim()
}

/// Whose use a limit counts: the user's (`…PerUser`), the account's (associations,
/// `…PerAccount`), or neither worth counting.
enum Scope {
    User,
    Account,
    Other,
}

fn limit_scope(code: &str) -> Scope {
    if code.contains("PerUser") {
        Scope::User
    } else if code.starts_with("Assoc") || code.contains("PerAccount") {
        Scope::Account
    } else {
        Scope::Other
    }
}

/// What a limit code counts, in words.
fn limit_words(code: &str) -> String {
    let owner = if code.starts_with("QOS") {
        "its QOS's"
    } else if code.starts_with("Assoc") {
        "its association's"
    } else if code.starts_with("Partition") {
        "its partition's"
    } else if code.contains("PerAccount") {
        "its account's"
    } else {
        "a"
    };
    let what = [
        ("GRES", "GPU"),
        ("Cpu", "CPU"),
        ("Node", "node"),
        ("Mem", "memory"),
        ("Submit", "submitted-job"),
        ("Jobs", "running-job"),
        ("Wall", "run-time"),
        ("Time", "run-time"),
        ("Billing", "billing"),
        ("License", "license"),
        ("Energy", "energy"),
        ("BB", "burst-buffer"),
    ]
    .into_iter()
    .find(|(k, _)| code.contains(k))
    .map_or("", |(_, w)| w);
    let per = if code.contains("PerUser") {
        " per user"
    } else if code.contains("PerJob") {
        " per job"
    } else if code.contains("PerNode") {
        " per node"
    } else if code.contains("Grp") || code.contains("PerAccount") {
        " in total"
    } else {
        ""
    };
    let minutes = if code.contains("Minutes") || code.contains("RunMins") {
        "-minutes"
    } else {
        ""
    };
    let space = if what.is_empty() { "" } else { " " };
    format!("{owner}{space}{what}{minutes} limit{per}")
}

fn plural(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The nodes of a partition (all nodes when a node lists none).
fn in_partition(n: &SchedNode, partition: &str) -> bool {
    n.partitions.is_empty() || partition.is_empty() || n.partitions.iter().any(|p| p == partition)
}

/// Free capacity of one partition now.
#[derive(Default)]
struct Free {
    nodes: u64,
    gpus: u64,
    /// Idle nodes per rack.
    by_rack: HashMap<String, u64>,
    unavailable: Vec<(String, &'static str)>,
}

fn free_in(nodes: &[SchedNode], partition: &str, rack_of: &dyn Fn(&str) -> Option<String>) -> Free {
    let mut f = Free::default();
    for n in nodes.iter().filter(|n| in_partition(n, partition)) {
        match n.state {
            NodeState::Idle => {
                f.nodes += 1;
                f.gpus += u64::from(n.gpus_total.unwrap_or(0));
                let rack = rack_of(&n.name).unwrap_or_default();
                *f.by_rack.entry(rack).or_default() += 1;
            }
            NodeState::Mixed => {
                f.gpus += u64::from(
                    n.gpus_total
                        .unwrap_or(0)
                        .saturating_sub(n.gpus_used.unwrap_or(0)),
                );
            }
            NodeState::Down | NodeState::NotResponding => {
                f.unavailable.push((n.name.clone(), "down"))
            }
            NodeState::Drained | NodeState::Draining => {
                f.unavailable.push((n.name.clone(), "drained"))
            }
            NodeState::Reserved | NodeState::Maintenance => {
                f.unavailable.push((n.name.clone(), "reserved"))
            }
            _ => {}
        }
    }
    f
}

/// Why each pending job of a poll waits, by job id. `rack_of` names a node's rack (its
/// block or leaf switch) from the inventory.
pub fn explain(
    jobs: &[SchedJob],
    nodes: &[SchedNode],
    rack_of: &dyn Fn(&str) -> Option<String>,
) -> HashMap<u64, Wait> {
    let pending: Vec<&SchedJob> = jobs
        .iter()
        .filter(|j| j.job.state == JobState::Pending)
        .collect();
    if pending.is_empty() {
        return HashMap::new();
    }
    // Running GPUs and jobs per user and per account, for limits' use now.
    let mut running = Running::default();
    for j in jobs.iter().filter(|j| j.job.state == JobState::Running) {
        for (m, k) in [
            (&mut running.by_user, &j.job.user),
            (&mut running.by_account, &j.job.account),
        ] {
            let e = m.entry(k.as_str()).or_default();
            e.0 += u64::from(j.job.gpus);
            e.1 += 1;
        }
    }
    // Priorities per partition, highest first, for "jobs ahead"; without priorities,
    // submit order stands in for them.
    let rank = |j: &SchedJob| {
        (
            j.queue.priority.unwrap_or(0),
            std::cmp::Reverse(j.job.submit_ms),
        )
    };
    // Only jobs that compete for nodes count as ahead (not held, limited or dependent).
    let competes = |j: &SchedJob| {
        matches!(
            kind_of(j.state_reason.as_deref().unwrap_or("None")),
            Some(WaitKind::Resources | WaitKind::Priority)
        )
    };
    let mut ranks: HashMap<&str, Vec<_>> = HashMap::new();
    for j in pending.iter().filter(|j| competes(j)) {
        ranks
            .entry(j.job.partition.as_str())
            .or_default()
            .push(rank(j));
    }
    for v in ranks.values_mut() {
        v.sort_unstable_by(|a, b| b.cmp(a));
    }
    let mut free: HashMap<&str, Free> = HashMap::new();
    let mut out = HashMap::with_capacity(pending.len());
    for j in pending {
        let part = j.job.partition.as_str();
        let r = rank(j);
        let ahead = ranks.get(part).map_or(0, |v| v.partition_point(|x| *x > r)) as u32;
        let f = free
            .entry(part)
            .or_insert_with(|| free_in(nodes, part, rack_of));
        let reason = j.state_reason.clone().unwrap_or_else(|| "None".into());
        let code = code_of(&reason).to_string();
        let kind = kind_of(&reason).unwrap_or(WaitKind::Starting);
        let (kind, words) = words_for(j, kind, (&code, &reason), ahead, f, &running);
        out.insert(
            j.job.id,
            Wait {
                kind,
                reason,
                words,
                est_start_ms: j.queue.est_start_ms,
                ahead,
            },
        );
    }
    out
}

/// GPUs and jobs running now per user and per account.
#[derive(Default)]
struct Running<'a> {
    by_user: HashMap<&'a str, (u64, u64)>,
    by_account: HashMap<&'a str, (u64, u64)>,
}

/// The category (a `Resources` or `Priority` wait may be a segment's) and the words of
/// one job's wait; `(code, reason)` is Slurm's code and its whole reason text.
fn words_for(
    j: &SchedJob,
    kind: WaitKind,
    (code, reason): (&str, &str),
    ahead: u32,
    f: &Free,
    running: &Running<'_>,
) -> (WaitKind, String) {
    let need = u64::from(j.node_count.max(1));
    let gpus = u64::from(j.job.gpus);
    let max_block = f.by_rack.values().copied().max().unwrap_or(0);
    let ahead_words = if ahead > 0 {
        format!("; {} ahead", plural(u64::from(ahead), "job"))
    } else {
        String::new()
    };
    match kind {
        WaitKind::Resources | WaitKind::Priority => {
            // A `--segment` job with enough free nodes in all, but too few in whole
            // segments inside single racks, waits for a block, not for GPUs.
            if let Some(s) = j.segment_size.filter(|&s| s > 1).map(u64::from) {
                let fit: u64 = f.by_rack.values().map(|n| n / s * s).sum();
                if f.nodes >= need && fit < need {
                    return (
                        WaitKind::Segment,
                        format!(
                            "Waiting for {need} nodes in segments of {s}, each inside one block: \
                             {} free, but only {fit} in whole segments (at most {max_block} free in one block){ahead_words}",
                            plural(f.nodes, "node")
                        ),
                    );
                }
            }
            let asks = if gpus > 0 {
                format!("{gpus} GPUs on {}", plural(need, "node"))
            } else {
                plural(need, "node")
            };
            let now = if f.nodes == 0 && f.gpus == 0 {
                "no node is free now".to_string()
            } else if f.nodes == 0 {
                format!("no node is free now ({} GPUs free on shared nodes)", f.gpus)
            } else {
                format!(
                    "{} free now ({} GPUs), at most {max_block} in one rack",
                    plural(f.nodes, "node"),
                    f.gpus
                )
            };
            // Enough free nodes in all, yet waiting: it asks for particular ones (a node
            // list, features, memory, exclusive use) that are busy.
            let particular = if f.nodes >= need {
                "; enough nodes are free, so it waits for particular ones (its node list, features or memory)"
            } else {
                ""
            };
            let w = if kind == WaitKind::Resources {
                format!("Waiting for {asks}: {now}{particular}{ahead_words}")
            } else {
                format!(
                    "{} of higher priority ahead in {}{}; it asks {asks}, {now}",
                    plural(u64::from(ahead), "job"),
                    if j.job.partition.is_empty() {
                        "its partition"
                    } else {
                        &j.job.partition
                    },
                    j.queue
                        .priority
                        .map(|p| format!(" (its priority {p})"))
                        .unwrap_or_default()
                )
            };
            (kind, w)
        }
        WaitKind::Limit => {
            let mut w = format!("Held back by {}", limit_words(code));
            let (who, (g, n)) = match limit_scope(code) {
                Scope::User => (
                    format!("user {}", j.job.user),
                    running
                        .by_user
                        .get(j.job.user.as_str())
                        .copied()
                        .unwrap_or_default(),
                ),
                Scope::Account => (
                    format!("account {}", j.job.account),
                    running
                        .by_account
                        .get(j.job.account.as_str())
                        .copied()
                        .unwrap_or_default(),
                ),
                Scope::Other => (String::new(), (0, 0)),
            };
            if !who.is_empty() {
                w.push_str(&format!(
                    ": {who} runs {g} GPUs in {} now; this job asks {gpus} more",
                    plural(n, "job")
                ));
            }
            (kind, w)
        }
        WaitKind::Dependency => {
            let dep = j
                .queue
                .dependency
                .clone()
                .filter(|d| !d.is_empty() && d != "(null)");
            let w = if code == "DependencyNeverSatisfied" {
                format!(
                    "Its dependency{} can never be met: cancel the job or change its dependency",
                    dep.map(|d| format!(" ({d})")).unwrap_or_default()
                )
            } else {
                match dep {
                    Some(d) => format!("Waiting for another job to end ({d})"),
                    None => "Waiting for another job to end".into(),
                }
            };
            (kind, w)
        }
        WaitKind::Held => {
            let w = match code {
                "JobHeldUser" => format!(
                    "Held by its owner: `scontrol release {}` lets it run",
                    j.job.id
                ),
                "JobHeldAdmin" => "Held by an administrator".into(),
                "BeginTime" => "Asked not to start before a later time (BeginTime)".into(),
                "JobHoldMaxRequeue" => "Held after too many requeues (MaxBatchRequeue)".into(),
                _ => format!("Held ({code})"),
            };
            (kind, w)
        }
        WaitKind::Nodes => {
            // Slurm 22.05's text form names them; else the partition's unavailable nodes.
            let named: Vec<String> = reason
                .split_once("UnavailableNodes:")
                .map(|(_, l)| vec![l.trim().to_string()])
                .unwrap_or_default();
            let listed = if !named.is_empty() {
                named
            } else {
                f.unavailable
                    .iter()
                    .map(|(n, how)| format!("{how} {n}"))
                    .collect()
            };
            let shown: Vec<&str> = listed.iter().take(8).map(String::as_str).collect();
            let more = listed.len().saturating_sub(shown.len());
            let mut w = match code {
                "Reservation" => "Waiting for its reservation to start".to_string(),
                "PartitionDown" | "PartitionInactive" => format!("Its partition is down ({code})"),
                _ => format!("Needs nodes that are unavailable ({code})"),
            };
            if !shown.is_empty() {
                w.push_str(&format!(": {}", shown.join(", ")));
                if more > 0 {
                    w.push_str(&format!(" and {more} more"));
                }
            }
            (kind, w)
        }
        WaitKind::Failed => (
            kind,
            format!("Its last run ended ({code}); it waits to run again"),
        ),
        WaitKind::Starting => (
            kind,
            if code == "None" {
                "Not yet looked at by the scheduler".into()
            } else {
                format!("Being set up ({code})")
            },
        ),
        WaitKind::Segment => (kind, format!("Waiting for a block ({code})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::Job;

    /// Every reason code of Slurm 22.05.8 to 26.05, from its sources.
    const SLURM_REASONS: &str = include_str!("slurm_reasons.txt");

    #[test]
    fn every_reason_slurm_writes_has_a_category() {
        let codes: Vec<&str> = SLURM_REASONS
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect();
        assert!(codes.len() > 200, "{} codes", codes.len());
        let unknown: Vec<&&str> = codes.iter().filter(|c| kind_of(c).is_none()).collect();
        assert!(unknown.is_empty(), "no category for {unknown:?}");
        for (code, kind) in [
            ("Resources", WaitKind::Resources),
            ("Priority", WaitKind::Priority),
            ("Dependency", WaitKind::Dependency),
            ("QOSMaxGRESPerUser", WaitKind::Limit),
            ("AssocGrpGRES", WaitKind::Limit),
            ("MaxGRESRunMinsPerUser", WaitKind::Limit),
            ("PartitionTimeLimit", WaitKind::Limit),
            (
                "ReqNodeNotAvail, UnavailableNodes:gpu[003-004]",
                WaitKind::Nodes,
            ),
            ("JobHeldUser", WaitKind::Held),
            ("BeginTime", WaitKind::Held),
            ("NodeDown", WaitKind::Nodes),
            ("None", WaitKind::Starting),
        ] {
            assert_eq!(kind_of(code), Some(kind), "{code}");
        }
        assert_eq!(kind_of("SomethingSlurmMayAddLater"), None);
    }

    #[test]
    fn limits_name_what_they_count() {
        assert_eq!(
            limit_words("QOSMaxGRESPerUser"),
            "its QOS's GPU limit per user"
        );
        assert_eq!(
            limit_words("AssocGrpGRESMinutes"),
            "its association's GPU-minutes limit in total"
        );
        assert_eq!(
            limit_words("MaxNodePerAccount"),
            "its account's node limit in total"
        );
    }

    fn node(name: &str, state: NodeState) -> SchedNode {
        SchedNode {
            name: name.into(),
            state,
            raw_state: vec![],
            reason: None,
            partitions: vec!["gpu".into()],
            gpus_total: Some(8),
            gpus_used: Some(if state == NodeState::Allocated { 8 } else { 0 }),
        }
    }

    fn job(id: u64, user: &str, state: JobState, nodes: u32, reason: &str, prio: u64) -> SchedJob {
        SchedJob {
            state_reason: Some(reason.into()),
            node_count: nodes,
            queue: QueueFacts {
                priority: Some(prio),
                est_start_ms: Some(1_000_000),
                ..Default::default()
            },
            ..SchedJob::of(Job {
                id,
                name: format!("j{id}"),
                user: user.into(),
                account: "research".into(),
                partition: "gpu".into(),
                state,
                nodes: vec![],
                gpus: nodes * 8,
                submit_ms: id as i64,
                start_ms: None,
                end_ms: None,
            })
        }
    }

    use super::super::QueueFacts;

    #[test]
    fn evidence_from_the_same_poll() {
        // Rack a: 3 idle; rack b: 1 idle, 1 busy, 1 drained.
        let nodes = vec![
            node("a1", NodeState::Idle),
            node("a2", NodeState::Idle),
            node("a3", NodeState::Idle),
            node("b1", NodeState::Idle),
            node("b2", NodeState::Allocated),
            node("b3", NodeState::Drained),
        ];
        let rack_of = |n: &str| Some(n[..1].to_string());
        let mut seg = job(4, "erin", JobState::Pending, 4, "Resources", 50);
        seg.segment_size = Some(2);
        let jobs = vec![
            job(1, "alice", JobState::Running, 1, "None", 0),
            job(2, "bob", JobState::Pending, 8, "Resources", 100),
            job(3, "carol", JobState::Pending, 2, "Priority", 90),
            seg,
            job(5, "alice", JobState::Pending, 1, "QOSMaxGRESPerUser", 10),
            job(6, "dave", JobState::Pending, 1, "ReqNodeNotAvail", 5),
        ];
        let w = explain(&jobs, &nodes, &rack_of);
        assert_eq!(w.len(), 5, "pending jobs only");
        let r = &w[&2];
        assert_eq!(
            (r.kind, r.ahead, r.est_start_ms),
            (WaitKind::Resources, 0, Some(1_000_000))
        );
        assert_eq!(
            r.words,
            "Waiting for 64 GPUs on 8 nodes: 4 nodes free now (32 GPUs), at most 3 in one rack"
        );
        assert_eq!((w[&3].kind, w[&3].ahead), (WaitKind::Priority, 1));
        assert!(
            w[&3]
                .words
                .starts_with("1 job of higher priority ahead in gpu (its priority 90)"),
            "{}",
            w[&3].words
        );
        // 4 free nodes, but whole segments of 2 only in rack a (2) and none in b.
        assert_eq!(w[&4].kind, WaitKind::Segment, "{}", w[&4].words);
        assert!(
            w[&4].words.contains("only 2 in whole segments"),
            "{}",
            w[&4].words
        );
        assert_eq!(w[&5].kind, WaitKind::Limit);
        assert_eq!(
            w[&5].words,
            "Held back by its QOS's GPU limit per user: user alice runs 8 GPUs in 1 job now; this job asks 8 more"
        );
        assert_eq!(
            w[&6].words,
            "Needs nodes that are unavailable (ReqNodeNotAvail): drained b3"
        );
    }
}
