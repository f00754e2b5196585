//! The one loop every source runs in: it owns the pipeline (made, resumed where a
//! predecessor stopped, started, finished at a clean stop), the ticker, the poke and the
//! shutdown. A [`Source`] only says what it has for the pipeline at an instant.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::model::{Inventory, UnixMs};
use tokio::sync::watch;

use crate::live::{Event, Frame, Live, Pipeline, StoreQueue};

/// A kind of cluster as the live source: what it gives the pipeline once per interval.
pub trait Source: Send + 'static {
    /// How the source names itself in the log ("simulator", "Slurm").
    const NAME: &'static str;

    /// One frame per this many milliseconds.
    fn interval_ms(&self) -> u64;

    /// Once, before the first tick: an inventory and the events so far, for history
    /// written before the first frame. Default: nothing (the first frame brings both).
    fn start(&mut self) -> impl Future<Output = Option<(Arc<Inventory>, Vec<Event>)>> + Send {
        async { None }
    }

    /// The frame for now, or `None` when there is nothing to publish (a failed poll:
    /// views age into stale instead of showing old data as current).
    fn frame(&mut self, live: &Live) -> impl Future<Output = Option<Frame>> + Send;

    /// Between ticks: waits for a request the source answers itself (the simulator's
    /// scheduler calls), answers it, and gives the events it caused, recorded at once.
    /// Must be cancel-safe up to its answer. Default: never.
    fn serve(&mut self) -> impl Future<Output = Vec<Event>> + Send {
        std::future::pending()
    }

    /// After each published frame; `took` since the tick began.
    fn published(&mut self, _live: &Live, _took: Duration) {}

    /// Once, after the last tick, before the pipeline's last writes.
    fn stop(&mut self) {}
}

/// What the pipeline of every source is made with.
pub struct PipelineSettings {
    /// Allocated GPUs under this SM activity count as idle in reports.
    pub idle_below_sm: f64,
    /// The hang rule's hold, which the badput ledger's hung time follows.
    pub hang_ms: i64,
    /// What a GPU held idle is (`alerts.idle_gpu_*`).
    pub idle_gpus: crate::aggregate::idle::IdleRule,
    /// Where a predecessor's reports stopped ([`Pipeline::resume`]), and the gap allowed.
    pub resume: Option<(UnixMs, i64)>,
}

/// Runs `src` as the live source until `shutdown` turns true: a frame every interval, or
/// at once when an action pokes `live`; history to `q`.
pub async fn run<S: Source>(
    mut src: S,
    settings: PipelineSettings,
    live: Arc<Live>,
    q: StoreQueue,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval_ms = src.interval_ms();
    let mut pipeline = Pipeline::new(interval_ms as i64, settings.idle_below_sm);
    pipeline.set_hang_ms(settings.hang_ms);
    pipeline.set_idle_rule(settings.idle_gpus);
    if let Some((at, gap)) = settings.resume {
        pipeline.resume(at, gap);
    }
    if let Some((inventory, events)) = src.start().await {
        pipeline.start(&inventory, &live, &q);
        pipeline.record(events, &live, &q);
    }
    let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => break,
            // After an action: publish its effect now rather than at the next interval.
            _ = live.poked() => {}
            events = src.serve() => {
                pipeline.record(events, &live, &q);
                continue;
            }
        }
        if *shutdown.borrow() {
            break;
        }
        let began = Instant::now();
        let Some(frame) = src.frame(&live).await else {
            continue;
        };
        pipeline.run(frame, &live, &q);
        src.published(&live, began.elapsed());
    }
    src.stop();
    pipeline.finish(&q);
    tracing::info!("{} source stopped", S::NAME);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::live::Latest;
    use crate::metrics::Metrics;
    use crate::sim::Sim;

    const T0: UnixMs = 1_793_624_400_000;

    /// A simulated cluster that only advances when asked for a frame, and fails when told.
    struct Scripted {
        sim: Sim,
        fail: Arc<AtomicBool>,
        asked: Arc<AtomicUsize>,
        stopped: Arc<AtomicBool>,
        requests: tokio::sync::mpsc::Receiver<()>,
    }

    impl Source for Scripted {
        const NAME: &'static str = "scripted";

        fn interval_ms(&self) -> u64 {
            // Ticks only at start: the rest of the test's frames come from pokes.
            3_600_000
        }

        async fn start(&mut self) -> Option<(Arc<Inventory>, Vec<Event>)> {
            Some((Arc::new(self.sim.inventory().clone()), Vec::new()))
        }

        async fn frame(&mut self, _live: &Live) -> Option<Frame> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return None;
            }
            let next = self.sim.now_ms() + 20_000;
            self.sim.advance_to(next);
            Some(Frame {
                inventory: Arc::new(self.sim.inventory().clone()),
                readings: Latest::Owned(Arc::new(self.sim.readings())),
                sched: super::super::sim::sched(&self.sim, 20_000),
                events: super::super::sim::events(self.sim.drain_events()),
                truth: None,
            })
        }

        async fn serve(&mut self) -> Vec<Event> {
            match self.requests.recv().await {
                Some(()) => Vec::new(),
                None => std::future::pending().await,
            }
        }

        fn stop(&mut self) {
            self.stopped.store(true, Ordering::SeqCst);
        }
    }

    async fn until(what: &str, ok: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ok() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn one_loop_ticks_pokes_skips_and_stops() {
        let store = crate::store::Store::connect("sqlite::memory:")
            .await
            .expect("store");
        let metrics = Arc::new(Metrics::default());
        let live = Live::new(Arc::clone(&metrics));
        let (q, writer) = crate::live::spawn_store_writer(store, metrics);
        let (fail, asked, stopped) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (ask, requests) = tokio::sync::mpsc::channel(4);
        let src = Scripted {
            sim: Sim::new(4, 3, "run", T0),
            fail: Arc::clone(&fail),
            asked: Arc::clone(&asked),
            stopped: Arc::clone(&stopped),
            requests,
        };
        let settings = PipelineSettings {
            idle_below_sm: 0.05,
            hang_ms: 600_000,
            idle_gpus: Default::default(),
            resume: None,
        };
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(src, settings, Arc::clone(&live), q, stop_rx));
        let seq = || live.current().map_or(0, |t| t.overview.seq);

        // The first tick is at once; the inventory is there from the start.
        until("the first frame", || seq() == 1).await;
        assert!(live.inventory().is_some());
        // A request answered between ticks publishes nothing by itself.
        ask.send(()).await.expect("request");
        // A poke publishes now, not an hour later.
        live.poke();
        until("the poked frame", || seq() == 2).await;
        // A frame the source does not have publishes nothing: views age.
        fail.store(true, Ordering::SeqCst);
        live.poke();
        until("the failed frame", || asked.load(Ordering::SeqCst) == 3).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(seq(), 2);
        fail.store(false, Ordering::SeqCst);
        live.poke();
        until("the frame after", || seq() == 3).await;

        let _ = stop.send(true);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the loop ends at shutdown")
            .expect("no panic");
        assert!(stopped.load(Ordering::SeqCst), "the source was stopped");
        // The loop held the last queue handle: the writer drains and ends.
        tokio::time::timeout(Duration::from_secs(10), writer)
            .await
            .expect("the writer ends")
            .expect("no panic");
    }
}
