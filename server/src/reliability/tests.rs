use app::model::{Inventory, Job, JobState, NodeState};
use app::reliability::Cause;
use app::reports::ReportQuery;

use super::*;

const H: i64 = 3_600_000;
const T0: i64 = 1_795_132_800_000;

fn job(id: u64, gpus: u32) -> Job {
    Job {
        id,
        name: format!("j{id}"),
        user: "u".into(),
        account: "a".into(),
        partition: "gpu".into(),
        state: JobState::Failed,
        nodes: vec![],
        gpus,
        submit_ms: T0,
        start_ms: Some(T0),
        end_ms: None,
    }
}

/// An inventory without racks or nodes: attribution needs none.
fn no_layout() -> Inventory {
    Inventory {
        cluster: "t".into(),
        halls: Vec::new(),
        rows: vec![],
        racks: vec![],
        nodes: vec![],
        domains: vec![],
    }
}

fn ev(job_id: u64, at_ms: i64, state: JobState, nodes: &[&str], detail: &str) -> JobEvent {
    JobEvent {
        job_id,
        at_ms,
        state,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        detail: detail.into(),
    }
}

#[test]
fn evidence_explains_one_interruption_and_only_near_its_end_on_its_nodes() {
    // Job 1 (8 GPUs on n1) fails at T0+1h with XID 79 seen 20 s later; job 2 starts on n1
    // right after and fails 4 minutes later with exit code 1: the XID is job 1's, so job 2
    // is the application's. Job 3 on n2 fails with an XID 79 on n1 nearby: not its node.
    // Job 4 on n3 ends NODE_FAIL 2 h after an ECC step there: too long before to count,
    // so Slurm's word decides (host).
    let exit_1 = "NonZeroExitCode; exit code 1";
    let mut events = vec![
        ev(1, T0, JobState::Running, &["n1"], ""),
        ev(1, T0 + H, JobState::Failed, &["n1"], exit_1),
        ev(2, T0 + H + 1_000, JobState::Running, &["n1"], ""),
        ev(2, T0 + H + 240_000, JobState::Failed, &["n1"], exit_1),
        ev(3, T0, JobState::Running, &["n2"], ""),
        ev(3, T0 + H, JobState::Failed, &["n2"], ""),
        ev(4, T0, JobState::Running, &["n3"], ""),
        ev(4, T0 + 3 * H, JobState::NodeFail, &["n3"], "NodeDown"),
        // A completed run is no interruption.
        ev(5, T0, JobState::Running, &["n4"], ""),
        ev(5, T0 + H, JobState::Completed, &["n4"], ""),
    ];
    events.sort_by_key(|e| (e.job_id, e.at_ms));
    let h = History {
        events,
        jobs: vec![job(1, 8), job(2, 8), job(3, 8), job(4, 8), job(5, 8)],
        xids: vec![XidRow {
            node: "n1".into(),
            gpu: 2,
            xid: 79,
            at_ms: T0 + H + 20_000,
        }],
        steps: vec![EvidenceRow {
            node: "n3".into(),
            gpu: Some(0),
            kind: crate::live::EVIDENCE_ECC_DBE.into(),
            at_ms: T0 + H,
            amount: 1,
        }],
        node_events: vec![],
        operator_requeues: vec![],
    };
    let inv = no_layout();
    let list = interruptions(&h, &inv, T0, T0 + 24 * H);
    let got: Vec<(u64, Cause)> = list.iter().map(|i| (i.job_id, i.cause)).collect();
    assert_eq!(
        got,
        vec![
            (1, Cause::Gpu),
            (3, Cause::Unknown),
            (2, Cause::UserApplication),
            (4, Cause::Host),
        ]
    );
    assert_eq!(list[0].node.as_deref(), Some("n1"));
    assert_eq!(list[0].run_start_ms, Some(T0));
    // Outside the period: none.
    assert!(interruptions(&h, &inv, T0 + 4 * H, T0 + 24 * H).is_empty());

    let q = ReportQuery::default();
    let r = assemble(&h, &inv, &q, T0, T0 + 24 * H, T0 + 24 * H);
    assert_eq!(r.total, 4);
    let share: f64 = r.by_cause.iter().map(|c| c.share).sum();
    assert!((share - 1.0).abs() < 1e-9);
    assert_eq!(r.unexpected, 3, "user application is not unexpected");
    // Rates: runs of 8 GPUs, 1 h + 4 min + 1 h + 3 h + 1 h of wall time, 4 interruptions.
    assert_eq!(r.by_size.len(), 1);
    let s = &r.by_size[0];
    let hours = 1.0 + (239_000.0 / H as f64) + 1.0 + 3.0 + 1.0;
    assert_eq!(
        (s.gpus_from, s.gpus_to, s.runs, s.interruptions),
        (1, 8, 5, 4)
    );
    assert!((s.run_hours - hours).abs() < 1e-9, "{}", s.run_hours);
    assert!((s.mtbi_hours.unwrap_or(0.0) - hours / 4.0).abs() < 1e-9);
    let per_1000 = r.mtbi_hours_per_1000_gpus.unwrap_or(0.0);
    assert!((per_1000 - hours * 8.0 / 1000.0 / 4.0).abs() < 1e-9);
    let csv = csv(
        &r,
        &interruptions(&h, &inv, T0, T0 + 24 * H),
        &[],
        "interruptions",
    )
    .unwrap_or_default();
    assert_eq!(csv.lines().count(), 5);
    assert!(
        csv.lines()
            .nth(1)
            .is_some_and(|l| l.contains(",gpu,\"n1\",")),
        "{csv}"
    );
    assert!(super::csv(&r, &[], &[], "nope").is_none());
}

#[test]
fn repairs_count_spans_that_ended_in_the_period() {
    let e = |node: &str, at_ms: i64, state: NodeState| NodeEventRow {
        node: node.into(),
        at_ms,
        state,
        reason: String::new(),
    };
    let h = History {
        node_events: vec![
            // Down 1 h, back; drained from 5 h on and still out at the end.
            e("n1", T0 + H, NodeState::Down),
            e("n1", T0 + 2 * H, NodeState::Idle),
            e("n1", T0 + 5 * H, NodeState::Drained),
            // Out since before the period, back 2 h in.
            e("n2", T0 - 3 * H, NodeState::Down),
            e("n2", T0 + 2 * H, NodeState::Idle),
        ],
        ..History::default()
    };
    let r = repairs(&h, T0, T0 + 10 * H, T0 + 10 * H);
    let n1 = r.iter().find(|n| n.node == "n1").expect("n1");
    assert_eq!(n1.repairs, 1);
    assert!((n1.out_of_service_hours - 6.0).abs() < 1e-9);
    assert_eq!(n1.mttr_hours, Some(1.0));
    let n2 = r.iter().find(|n| n.node == "n2").expect("n2");
    // Repaired after 5 h out, 2 of them in the period.
    assert_eq!((n2.repairs, n2.mttr_hours), (1, Some(5.0)));
    assert!((n2.out_of_service_hours - 2.0).abs() < 1e-9);
}

#[test]
fn a_lemon_is_ranked_first_and_its_mark_holds_until_the_score_falls_below_the_clear_line() {
    const D: i64 = 24 * H;
    // "bad" takes down a job with XID 48 at days 0.5, 1, 1.5 and 2 (3 + 1 points each);
    // "ok" one with XID 79 at day 1, and was down for 12 hours once (2 + 0.5 points).
    let mut events = Vec::new();
    let mut xids = Vec::new();
    let mut jobs = Vec::new();
    for (k, (node, at, xid)) in [
        ("bad", D / 2, 48),
        ("bad", D, 48),
        ("bad", 3 * D / 2, 48),
        ("bad", 2 * D, 48),
        ("ok", D, 79),
    ]
    .into_iter()
    .enumerate()
    {
        let id = k as u64 + 1;
        events.push(ev(id, T0 + at - H, JobState::Running, &[node], ""));
        events.push(ev(id, T0 + at, JobState::Failed, &[node], ""));
        xids.push(XidRow {
            node: node.into(),
            gpu: 0,
            xid,
            at_ms: T0 + at + 20_000,
        });
        jobs.push(job(id, 8));
    }
    events.sort_by_key(|e| (e.job_id, e.at_ms));
    let down = |at_ms: i64, state: NodeState| NodeEventRow {
        node: "ok".into(),
        at_ms,
        state,
        reason: String::new(),
    };
    let h = History {
        events,
        jobs,
        xids,
        node_events: vec![
            down(T0 + 3 * D, NodeState::Down),
            down(T0 + 3 * D + 12 * H, NodeState::Idle),
        ],
        ..History::default()
    };
    let inv = no_layout();
    let q = ReportQuery::default();
    // Through day 8.5: the trailing week holds two of bad's faults (8 points), under the
    // line that sets the mark (12) but not under the one that clears it (6).
    let r = assemble(&h, &inv, &q, T0, T0 + 17 * D / 2, T0 + 20 * D);
    let names: Vec<&str> = r.lemons.iter().map(|l| l.node.as_str()).collect();
    assert_eq!(names, ["bad", "ok"]);
    let bad = &r.lemons[0];
    assert_eq!(
        (bad.jobs_taken_down, bad.hardware_xids, bad.outages),
        (4, 4, 0)
    );
    assert!((bad.score - 16.0).abs() < 1e-9, "{}", bad.score);
    assert!(
        (bad.recent_score - 8.0).abs() < 1e-9,
        "{}",
        bad.recent_score
    );
    assert!(bad.rma, "marked on day 2, held by hysteresis");
    assert_eq!(bad.evidence, "4 jobs taken down; XID 48 x4");
    let ok = &r.lemons[1];
    assert!((ok.score - 6.5).abs() < 1e-9, "{}", ok.score);
    assert!(!ok.rma);
    assert_eq!(
        ok.evidence,
        "1 job taken down; XID 79 x1; 1 outage, 12.0 h out of service"
    );
    // Through day 10: on day 9 the week held one fault (4 points), under 6: cleared.
    let r = assemble(&h, &inv, &q, T0, T0 + 10 * D, T0 + 20 * D);
    assert!(!r.lemons[0].rma);
    assert_eq!(r.lemons[0].node, "bad");
    // A period after the faults still sees them in its trailing week: marked at its start.
    let r = assemble(&h, &inv, &q, T0 + 3 * D, T0 + 4 * D, T0 + 20 * D);
    let bad = r.lemons.iter().find(|l| l.node == "bad").expect("bad");
    assert_eq!(
        bad.jobs_taken_down, 0,
        "no job taken down in the period itself"
    );
    assert!(bad.rma);
    let csv = csv(&r, &[], &[], "lemons").unwrap_or_default();
    assert!(csv.starts_with("node,rack,score,"), "{csv}");
}
