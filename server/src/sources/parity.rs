//! Parity of the two sources: the same recorded instants of a simulated cluster, fed once
//! as the simulator source builds its frames (readings straight from the model) and once
//! as the Slurm source builds them (what Slurm's node and job lists say, plus readings
//! decoded from the exporters' text), come out of the pipeline as the same overviews,
//! throttling losses, rollups, report deltas and history.
//!
//! Job transitions are each source's own (the simulator knows when things happened; Slurm
//! is read at polls, tested in `slurm::tests`), so both paths are given the simulator's
//! events: what is compared is everything that follows a frame.

use std::sync::Arc;
use std::time::Duration;

use crate::live::{Frame, Latest, Live, Pipeline, Step};
use crate::metrics::Metrics;
use crate::sim::{exporter, Sim};
use crate::telemetry::ingest::{Fetched, Ingest, Kind, PowerMapping};
use crate::telemetry::scrape::{Client, ScrapeConfig, ScrapeError};

/// 2026-11-02 13:00 UTC: the weak rack's warm afternoon, so GPUs throttle.
const T0: i64 = 1_793_624_400_000;
const TICK_MS: i64 = 20_000;
/// A little over two hours of ticks: minute and hour rollups close, reports flush.
const TICKS: usize = 400;

/// The exporters' answers for every node at the simulator's current instant.
fn scrape(sim: &Sim) -> Vec<Fetched> {
    let inv = sim.inventory();
    let r = sim.readings();
    let mut out = Vec::new();
    for n in &inv.nodes {
        let texts = [
            (Kind::Gpu, exporter::render_dcgm(inv, &r, &n.name)),
            (Kind::Bmc, exporter::render_ipmi(inv, &r, &n.name)),
            (Kind::Node, exporter::render_node(inv, &r, &n.name)),
        ];
        for (kind, text) in texts {
            // A node that is off does not answer.
            let result = text
                .map(String::into_bytes)
                .ok_or(ScrapeError::Connect("connection refused".into()));
            out.push(Fetched::answer(
                &n.name,
                &format!("http://{}/{kind:?}", n.name),
                kind,
                result,
            ));
        }
    }
    out
}

/// Where two renderings first differ, with some context on each side.
fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let from = a[..at].char_indices().rev().nth(160).map_or(0, |(i, _)| i);
    let cut = |s: &str| {
        s.get(from..)
            .unwrap_or("")
            .chars()
            .take(320)
            .collect::<String>()
    };
    format!("\n  a: ...{}\n  b: ...{}", cut(a), cut(b))
}

fn same(what: &str, tick: usize, a: &Step, b: &Step) {
    let (oa, ob) = (format!("{:?}", a.overview), format!("{:?}", b.overview));
    assert!(
        oa == ob,
        "{what}: overviews differ at tick {tick}: {}",
        first_difference(&oa, &ob)
    );
    same_history(what, tick, a, b);
}

fn same_history(what: &str, tick: usize, a: &Step, b: &Step) {
    assert_eq!(
        a.writes.len(),
        b.writes.len(),
        "{what}: number of history writes at tick {tick}"
    );
    for (wa, wb) in a.writes.iter().zip(&b.writes) {
        assert_eq!(
            format!("{wa:?}"),
            format!("{wb:?}"),
            "{what}: history at tick {tick}"
        );
    }
}

#[tokio::test]
async fn both_sources_feed_one_pipeline_alike() {
    let mut sim = Sim::new(16, 11, "parity", T0);
    // Faults often enough that both paths must find their evidence (XIDs, ECC and link
    // counter steps) in their own readings.
    sim.set_fault_mean_gpu_hours(Some(10.0));
    let inventory = Arc::new(sim.inventory().clone());
    let (live_a, live_b) = (
        Live::new(Arc::new(Metrics::default())),
        Live::new(Arc::new(Metrics::default())),
    );
    let (mut a, mut b) = (Pipeline::new(TICK_MS, 0.05), Pipeline::new(TICK_MS, 0.05));
    let mut ingest = Ingest::new(
        Client::new(
            ScrapeConfig {
                timeout: Duration::from_secs(1),
                ..ScrapeConfig::default()
            },
            crate::tls::client_config(None).expect("tls"),
        ),
        Vec::new(),
        PowerMapping::default(),
        4,
    );
    let frames = super::slurm::SlurmFrames::new(None, "parity", TICK_MS as u64);
    let mut pending = super::sim::events(sim.drain_events());
    let (mut was_down, mut settle, mut skipped) = (Vec::new(), 0u32, 0);
    let (mut throttled_ticks, mut rollups, mut reports, mut evidence) = (0, 0, 0, 0);
    for tick in 0..TICKS {
        sim.advance_to(T0 + tick as i64 * TICK_MS);
        let mut events = std::mem::take(&mut pending);
        events.extend(super::sim::events(sim.drain_events()));
        let now = sim.now_ms();

        // The simulator source: its model's readings and scheduler view.
        let mut fa = Frame {
            inventory: Arc::clone(&inventory),
            readings: Latest::Owned(Arc::new(sim.readings())),
            sched: super::sim::sched(&sim, TICK_MS as u64),
            events: events.clone(),
            truth: None,
        };
        // The Slurm source: Slurm's lists and the exporters' text, decoded by the scraper.
        ingest.apply(scrape(&sim), now);
        let mut fb = frames.frame(
            Arc::clone(&inventory),
            sim.slurm_nodes(),
            sim.slurm_jobs(),
            now,
            Some((&ingest, now, 2 * TICK_MS)),
            events,
        );
        // Around a run that started or ended between two ticks: the scraper's rate is the
        // interval's mean, the model's that of the instant.
        let run_ended = fa.events.iter().any(|e| {
            matches!(e, crate::live::Event::Job { job, .. } if job.state.is_finished()
                || matches!(job.state, app::model::JobState::Requeued | app::model::JobState::Running))
        });
        let sa = a.step(&mut fa, &live_a, now);
        let sb = b.step(&mut fb, &live_b, now);
        // The exporters publish InfiniBand counters; the scraper needs two scrapes for a
        // rate, so the first frame of the Slurm path has none yet (the frames are made
        // above, so every tick's history is still written through both). Around a node that stops
        // or starts answering likewise: the scraper holds its last readings while they are
        // fresh (two ticks) and its first rate after an outage spans the outage, where the
        // model knows the instant's; and after a run ended (see above).
        let down: Vec<bool> = sim
            .slurm_nodes()
            .iter()
            .map(|n| n.state == app::model::NodeState::Down)
            .collect();
        if tick > 0 && (down != was_down || run_ended) {
            settle = 3;
        }
        was_down = down;
        for w in &sa.writes {
            if matches!(
                w,
                crate::live::StoreWrite::Xid { .. } | crate::live::StoreWrite::Evidence { .. }
            ) {
                evidence += 1;
            }
        }
        if tick == 0 {
            continue;
        }
        if settle > 0 {
            // The history is the same even then.
            same_history("simulator vs Slurm source", tick, &sa, &sb);
            settle -= 1;
            skipped += 1;
            continue;
        }
        same("simulator vs Slurm source", tick, &sa, &sb);
        throttled_ticks += usize::from(sa.overview.summary.gpus_throttling > 0);
        for w in &sa.writes {
            match w {
                crate::live::StoreWrite::Rollup(_) | crate::live::StoreWrite::Rollup1h(_) => {
                    rollups += 1
                }
                crate::live::StoreWrite::Report { .. } => reports += 1,
                _ => {}
            }
        }
        if tick + 1 == TICKS {
            let th = &sa.overview.thermal;
            assert!(th.lost_gpu_hours > 0.0, "GPU-hours lost on both: {th:?}");
            assert!(!th.lost_by_rack.is_empty());
        }
    }
    // The comparison covered what matters: throttling, closed rollups, report deltas.
    assert!(
        throttled_ticks > 10,
        "{throttled_ticks} ticks with throttling"
    );
    assert!(rollups > 100, "{rollups} rollups");
    assert!(reports > 10, "{reports} report deltas");
    assert!(
        evidence > 3,
        "{evidence} pieces of hardware evidence; {:?}",
        sim.interruptions()
    );
    assert!(skipped * 4 < TICKS, "{skipped} ticks not compared");
}
