//! The attribution rules: which evidence names which cause, in which order. A table in
//! code, with XID classes after NVIDIA's XID catalog. Pure.

use app::model::{JobState, NodeState, UnixMs};
use app::reliability::Cause;

use crate::store::{EvidenceRow, NodeEventRow, XidRow};

/// Evidence counts for a run's end from this long before it (and never before the run
/// started) ...
pub const BEFORE_MS: i64 = 15 * 60_000;
/// ... to this long after it: exporters and polls see a fault a scrape or two late.
pub const AFTER_MS: i64 = 5 * 60_000;

/// What an XID says about who failed, after NVIDIA's catalog (`None`: no cause by itself,
/// like 45, preemptive cleanup after an earlier error).
pub fn xid_cause(xid: u32) -> Option<Cause> {
    Some(match xid {
        // Uncorrectable memory: double-bit ECC, row remapping recorded or failed,
        // contained, uncontained and unrecovered ECC errors.
        48 | 63 | 64 | 94 | 95 | 140 => Cause::GpuMemory,
        // The GPU itself: fallen off the bus, its system processor (GSP) timed out or
        // failed, an internal micro-controller halted.
        61 | 62 | 79 | 119 | 120 => Cause::Gpu,
        74 => Cause::NvLink,
        // Exceptions the application's own code causes: an illegal address, a graphics
        // engine exception, the GPU stopped processing (often a killed process).
        13 | 31 | 43 | 68 | 69 => Cause::UserApplication,
        _ => return None,
    })
}

fn meaning(xid: u32) -> &'static str {
    app::xid::lookup(xid).map_or("not in Gantry's XID catalog", |(m, _)| m)
}

/// A run that ended before its time.
#[derive(Clone, Debug)]
pub struct RunEnd<'a> {
    pub job_id: u64,
    pub at_ms: UnixMs,
    pub run_start_ms: Option<UnixMs>,
    pub state: JobState,
    pub nodes: &'a [String],
    /// The scheduler's words: reason, exit code ("NonZeroExitCode; exit code 1").
    pub detail: &'a str,
    /// An operator requeued it through Gantry around its end.
    pub by_operator: bool,
}

/// Evidence near one run's end, on its nodes, not claimed by an earlier interruption.
#[derive(Clone, Debug, Default)]
pub struct Near<'a> {
    pub xids: Vec<(usize, &'a XidRow)>,
    pub steps: Vec<(usize, &'a EvidenceRow)>,
    pub node_events: Vec<(usize, &'a NodeEventRow)>,
}

/// The finding for one run's end.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub cause: Cause,
    pub node: Option<String>,
    pub evidence: String,
    /// What it used, to be claimed: ("xid" | "step" | "node", index).
    pub claims: Option<(&'static str, usize)>,
}

/// The signal that killed the job, from the scheduler's words ("RaisedSignal:6(Aborted)",
/// "signal 9").
pub fn signal_of(detail: &str) -> Option<u32> {
    for key in ["RaisedSignal:", "signal "] {
        if let Some(i) = detail.find(key) {
            let rest = &detail[i + key.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// The exit code in the scheduler's words ("exit code 1"), if any.
pub fn exit_code_of(detail: &str) -> Option<i64> {
    let i = detail.find("exit code ")?;
    let rest = &detail[i + "exit code ".len()..];
    let n: String = rest
        .chars()
        .enumerate()
        .take_while(|(k, c)| c.is_ascii_digit() || (*k == 0 && *c == '-'))
        .map(|(_, c)| c)
        .collect();
    n.parse().ok()
}

/// Attributes one run's end. In this order, the first that holds:
/// 1. an operator's requeue (or a preemption): planned;
/// 2. the earliest XID of a hardware class on its nodes (GPU memory, GPU, NVLink);
/// 3. a double-bit ECC counter step on its nodes: GPU memory;
/// 4. an InfiniBand link-down step on its nodes: network;
/// 5. one of its nodes stopped answering (down, not responding), or Slurm ended it
///    NODE_FAIL: host;
/// 6. a signal killed it: software (an NCCL watchdog aborts with SIGABRT);
/// 7. an XID the application causes, or a non-zero exit code: user application;
/// 8. else unknown.
pub fn attribute(run: &RunEnd<'_>, near: &Near<'_>) -> Finding {
    let found = |cause, node: Option<&str>, evidence: String, claims| Finding {
        cause,
        node: node.map(str::to_string),
        evidence,
        claims,
    };
    if run.by_operator
        || run
            .detail
            .contains(crate::sources::sim::REQUEUED_BY_OPERATOR)
    {
        return found(Cause::Planned, None, "requeued by an operator".into(), None);
    }
    let hardware = near
        .xids
        .iter()
        .filter_map(|(k, x)| {
            xid_cause(x.xid)
                .filter(|c| *c != Cause::UserApplication)
                .map(|c| (k, x, c))
        })
        .min_by_key(|(_, x, c)| (x.at_ms, *c));
    if let Some((k, x, c)) = hardware {
        return found(
            c,
            Some(&x.node),
            format!(
                "XID {} on {} GPU {}: {}",
                x.xid,
                x.node,
                x.gpu,
                meaning(x.xid)
            ),
            Some(("xid", *k)),
        );
    }
    let step = |kind: &str| {
        near.steps
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .min_by_key(|(_, s)| s.at_ms)
    };
    if let Some((k, s)) = step(crate::live::EVIDENCE_ECC_DBE) {
        return found(
            Cause::GpuMemory,
            Some(&s.node),
            format!(
                "{} double-bit ECC error{} on {} GPU {}",
                s.amount,
                if s.amount == 1 { "" } else { "s" },
                s.node,
                s.gpu.map_or_else(|| "?".into(), |g| g.to_string())
            ),
            Some(("step", *k)),
        );
    }
    if let Some((k, s)) = step(crate::live::EVIDENCE_IB_LINK_DOWN) {
        return found(
            Cause::Network,
            Some(&s.node),
            format!("an InfiniBand link of {} went down", s.node),
            Some(("step", *k)),
        );
    }
    let stopped = near
        .node_events
        .iter()
        .filter(|(_, e)| matches!(e.state, NodeState::Down | NodeState::NotResponding))
        .min_by_key(|(_, e)| e.at_ms);
    if let Some((k, e)) = stopped {
        let why = if e.reason.is_empty() {
            e.state.label().to_string()
        } else {
            e.reason.clone()
        };
        return found(
            Cause::Host,
            Some(&e.node),
            format!("{} stopped answering ({why})", e.node),
            Some(("node", *k)),
        );
    }
    if run.state == JobState::NodeFail {
        return found(
            Cause::Host,
            None,
            "Slurm ended the job NODE_FAIL".into(),
            None,
        );
    }
    if let Some(sig) = signal_of(run.detail) {
        return found(
            Cause::Software,
            None,
            format!("killed by signal {sig} ({})", run.detail),
            None,
        );
    }
    if let Some((k, x)) = near
        .xids
        .iter()
        .filter(|(_, x)| xid_cause(x.xid) == Some(Cause::UserApplication))
        .min_by_key(|(_, x)| x.at_ms)
    {
        return found(
            Cause::UserApplication,
            Some(&x.node),
            format!(
                "XID {} on {} GPU {}: {}",
                x.xid,
                x.node,
                x.gpu,
                meaning(x.xid)
            ),
            Some(("xid", *k)),
        );
    }
    if let Some(code) = exit_code_of(run.detail).filter(|c| *c != 0) {
        return found(
            Cause::UserApplication,
            None,
            format!("exit code {code}"),
            None,
        );
    }
    found(
        Cause::Unknown,
        None,
        if run.detail.is_empty() {
            "no evidence".into()
        } else {
            format!("no evidence ({})", run.detail)
        },
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<'a>(nodes: &'a [String], state: JobState, detail: &'a str) -> RunEnd<'a> {
        RunEnd {
            job_id: 1,
            at_ms: 1_000_000,
            run_start_ms: Some(0),
            state,
            nodes,
            detail,
            by_operator: false,
        }
    }

    fn xid(node: &str, xid: u32, at_ms: i64) -> XidRow {
        XidRow {
            node: node.into(),
            gpu: 3,
            xid,
            at_ms,
        }
    }

    #[test]
    fn each_kind_of_evidence_names_its_cause_in_order() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let exit_1 = "NonZeroExitCode; exit code 1";
        let none = Near::default();
        // A job's own error, and nothing else.
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, exit_1), &none).cause,
            Cause::UserApplication
        );
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, ""), &none).cause,
            Cause::Unknown
        );
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, "exit code 0"), &none).cause,
            Cause::Unknown
        );
        let abort = attribute(
            &run(
                &nodes,
                JobState::Failed,
                "RaisedSignal:6(Aborted); exit code 0",
            ),
            &none,
        );
        assert_eq!(abort.cause, Cause::Software);
        assert_eq!(
            attribute(&run(&nodes, JobState::NodeFail, "NodeDown"), &none).cause,
            Cause::Host
        );
        // A hardware XID outranks the exit code it caused; the earliest wins.
        let (a, b, c) = (
            xid("n2", 74, 990_000),
            xid("n1", 79, 980_000),
            xid("n1", 13, 970_000),
        );
        let near = Near {
            xids: vec![(0, &a), (1, &b), (2, &c)],
            ..Near::default()
        };
        let f = attribute(&run(&nodes, JobState::Failed, exit_1), &near);
        assert_eq!(
            (f.cause, f.node.as_deref(), f.claims),
            (Cause::Gpu, Some("n1"), Some(("xid", 1)))
        );
        assert!(
            f.evidence.starts_with("XID 79 on n1 GPU 3"),
            "{}",
            f.evidence
        );
        // An application XID alone is the application's.
        let near = Near {
            xids: vec![(2, &c)],
            ..Near::default()
        };
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, exit_1), &near).cause,
            Cause::UserApplication
        );
        // Counter steps and a node that stopped answering.
        let dbe = EvidenceRow {
            node: "n2".into(),
            gpu: Some(5),
            kind: crate::live::EVIDENCE_ECC_DBE.into(),
            at_ms: 1_000_000,
            amount: 1,
        };
        let link = EvidenceRow {
            kind: crate::live::EVIDENCE_IB_LINK_DOWN.into(),
            gpu: None,
            ..dbe.clone()
        };
        let down = NodeEventRow {
            node: "n1".into(),
            at_ms: 1_000_500,
            state: NodeState::Down,
            reason: "Not responding".into(),
        };
        let all = Near {
            steps: vec![(0, &link), (1, &dbe)],
            node_events: vec![(0, &down)],
            ..Near::default()
        };
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, exit_1), &all).cause,
            Cause::GpuMemory
        );
        let no_dbe = Near {
            steps: vec![(0, &link)],
            node_events: vec![(0, &down)],
            ..Near::default()
        };
        assert_eq!(
            attribute(&run(&nodes, JobState::Failed, exit_1), &no_dbe).cause,
            Cause::Network
        );
        let only_down = Near {
            node_events: vec![(0, &down)],
            ..Near::default()
        };
        let f = attribute(&run(&nodes, JobState::NodeFail, "NodeDown"), &only_down);
        assert_eq!((f.cause, f.node.as_deref()), (Cause::Host, Some("n1")));
        assert_eq!(f.evidence, "n1 stopped answering (Not responding)");
        // An operator's requeue is planned, whatever else is near.
        let mut r = run(&nodes, JobState::Requeued, "restart 1");
        r.by_operator = true;
        assert_eq!(attribute(&r, &all).cause, Cause::Planned);
    }

    #[test]
    fn exit_codes_and_signals_are_read_from_the_schedulers_words() {
        assert_eq!(exit_code_of("NonZeroExitCode; exit code 3"), Some(3));
        assert_eq!(exit_code_of("exit code -1"), Some(-1));
        assert_eq!(exit_code_of("None"), None);
        assert_eq!(signal_of("RaisedSignal:9(Killed)"), Some(9));
        assert_eq!(signal_of("killed by signal 11"), Some(11));
        assert_eq!(signal_of("NonZeroExitCode; exit code 1"), None);
    }

    #[test]
    fn xid_classes_follow_the_catalog() {
        for (x, c) in [
            (48, Some(Cause::GpuMemory)),
            (79, Some(Cause::Gpu)),
            (119, Some(Cause::Gpu)),
            (74, Some(Cause::NvLink)),
            (31, Some(Cause::UserApplication)),
            (45, None),
        ] {
            assert_eq!(xid_cause(x), c, "XID {x}");
        }
    }
}
