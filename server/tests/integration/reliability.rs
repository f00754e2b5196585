//! Reliability's truth test: four simulated days of a 32-node cluster with frequent faults
//! of every class, run through the pipeline (which finds the evidence in the readings as
//! it would in a real cluster's) into a real database (SQLite and PostgreSQL), then
//! attributed from the stored history and compared with the simulator's own causes.

use std::collections::HashMap;
use std::sync::Arc;

use app::reliability::Cause;
use server::live::{Frame, Latest, Live, Pipeline, StoreWrite};
use server::metrics::Metrics;
use server::sim::Sim;
use server::store::Store;

use crate::support;

/// 2026-11-10 00:00 UTC.
const T0: i64 = 1_794_268_800_000;
const TICK_MS: i64 = 60_000;
const DAYS: i64 = 4;

/// The history writes of the run, and the simulator at its end.
fn run() -> (Vec<StoreWrite>, Sim) {
    let mut sim = Sim::new(32, 5, "rel", T0);
    // 256 GPUs, a fault every 50 GPU-hours of runs.
    sim.set_fault_mean_gpu_hours(Some(50.0));
    let inventory = Arc::new(sim.inventory().clone());
    let live = Live::new(Arc::new(Metrics::default()));
    let mut pipeline = Pipeline::new(TICK_MS, 0.05);
    let mut writes = Vec::new();
    let mut pending = server::sources::sim::events(sim.drain_events());
    for tick in 1..=(DAYS * 86_400_000 / TICK_MS) {
        sim.advance_to(T0 + tick * TICK_MS);
        let mut events = std::mem::take(&mut pending);
        events.extend(server::sources::sim::events(sim.drain_events()));
        let mut frame = Frame {
            inventory: Arc::clone(&inventory),
            readings: Latest::Owned(Arc::new(sim.readings())),
            sched: server::sources::sim::sched(&sim, TICK_MS as u64),
            events,
            truth: None,
        };
        let step = pipeline.step(&mut frame, &live, sim.now_ms());
        writes.extend(step.writes.into_iter().filter(|w| {
            matches!(
                w,
                StoreWrite::Inventory(_)
                    | StoreWrite::Job { .. }
                    | StoreWrite::Xid { .. }
                    | StoreWrite::Evidence { .. }
                    | StoreWrite::NodeState { .. }
            )
        }));
    }
    (writes, sim)
}

async fn check(url: &str, writes: &[StoreWrite], sim: &Sim) {
    let store = Store::connect(url).await.expect("store");
    for w in writes {
        w.write_to(&store).await.expect("write");
    }
    let to = T0 + DAYS * 86_400_000;
    let q = app::reports::ReportQuery {
        period: app::reports::Period::Custom,
        from: Some(app::units::date(T0)),
        to: Some(app::units::date(to - 1)),
        ..Default::default()
    };
    let (r, h) = server::reliability::build(&store, sim.inventory(), &q, to)
        .await
        .expect("reliability");
    let found = server::reliability::interruptions(&h, sim.inventory(), T0, to);
    let truth = sim.interruptions();
    assert!(
        truth.len() > 80,
        "{} interruptions in four days",
        truth.len()
    );
    // Every class the simulator makes, there.
    for c in [
        Cause::Gpu,
        Cause::GpuMemory,
        Cause::Network,
        Cause::Host,
        Cause::Software,
        Cause::UserApplication,
    ] {
        assert!(truth.iter().any(|t| t.cause == c), "no {c:?} in the truth");
    }
    let by_key: HashMap<(u64, i64), Cause> = found
        .iter()
        .map(|i| ((i.job_id, i.at_ms), i.cause))
        .collect();
    assert_eq!(
        found.len(),
        truth.len(),
        "as many interruptions as happened"
    );
    let (mut with, mut with_right, mut without, mut without_unknown) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for t in truth {
        let got = by_key.get(&(t.job, t.at_ms)).copied();
        if t.evidence {
            with += 1;
            if got == Some(t.cause) {
                with_right += 1;
            } else {
                wrong.push((t.job, t.cause, got));
            }
        } else {
            without += 1;
            without_unknown += usize::from(got == Some(Cause::Unknown));
        }
    }
    eprintln!(
        "{url}: {} interruptions; {with_right} of {with} with evidence attributed right, {without_unknown} of {without} without evidence unknown",
        truth.len()
    );
    assert!(
        with_right * 100 >= with * 95,
        "{with_right} of {with} attributed right; wrong: {wrong:?}"
    );
    assert_eq!(without_unknown, without, "no evidence: unknown");
    assert!(without > 0, "the truth has interruptions without evidence");
    // The page's answer agrees with the list and sums up.
    assert_eq!(r.total as usize, truth.len());
    assert_eq!(
        r.by_cause.iter().map(|c| c.count).sum::<u32>(),
        r.total,
        "causes sum to the total"
    );
    let host = r
        .by_cause
        .iter()
        .find(|c| c.cause == Cause::Host)
        .map_or(0, |c| c.count);
    assert!(host > 0);
    assert!(r.mtbi_hours_per_1000_gpus.is_some_and(|h| h > 0.0));
    assert!(r
        .by_size
        .iter()
        .any(|s| s.interruptions > 0 && s.mtbi_hours.is_some()));
    // Nodes that stopped answering came back: repairs with a mean time.
    assert!(r
        .repairs
        .iter()
        .any(|n| n.repairs > 0 && n.mttr_hours.is_some()));
}

#[tokio::test]
async fn interruptions_are_attributed_as_the_simulator_caused_them_on_both_databases() {
    let (writes, sim) = run();
    check(&support::sqlite_url(), &writes, &sim).await;
    if let Some(pg) = support::postgres_url().await {
        check(&pg, &writes, &sim).await;
    }
}
