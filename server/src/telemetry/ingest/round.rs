//! A scrape round: [`Ingest::plan`] picks the targets due (healthy ones every round,
//! failing ones after their backoff, each at its own phase with jitter), [`Round::fetch`]
//! fetches them without the `Ingest`, [`Ingest::apply`] takes the answers.

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use app::model::UnixMs;

use super::{Ingest, Kind, RoundStats, FABRIC_MIN_INTERVAL};
use crate::telemetry::scrape::{Client, ScrapeError};

/// A stable offset in `[0, interval)` for `url` (FNV-1a).
fn phase_ms(url: &str, interval: Duration) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % (interval.as_millis().max(1) as u64)) as i64
}

/// The scrapes of one round, planned from an [`Ingest`] and fetched without it.
pub struct Round {
    client: Client,
    concurrency: usize,
    jobs: Vec<(String, String, Kind)>,
}

impl Round {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Fetches every planned target, `concurrency` at a time; a slow or failing target
    /// holds up only its own slot.
    pub async fn fetch(self) -> Vec<Fetched> {
        let client = self.client;
        stream::iter(self.jobs)
            .map(|(node, url, kind)| {
                let client = client.clone();
                async move {
                    let t = Instant::now();
                    let result = client.fetch(&url).await;
                    Fetched {
                        node,
                        url,
                        kind,
                        result,
                        took: t.elapsed(),
                    }
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await
    }
}

/// One target's answer in a round.
pub struct Fetched {
    node: String,
    url: String,
    kind: Kind,
    result: Result<Vec<u8>, ScrapeError>,
    took: Duration,
}

impl Fetched {
    /// An answer (the body, or why there is none) of `node`'s `kind` exporter at `url`, as a
    /// round would have fetched it: for tests and for replaying recorded scrapes.
    pub fn answer(node: &str, url: &str, kind: Kind, result: Result<Vec<u8>, ScrapeError>) -> Self {
        Fetched {
            node: node.into(),
            url: url.into(),
            kind,
            result,
            took: Duration::ZERO,
        }
    }
}

impl Ingest {
    /// Scrapes every target once, `concurrency` at a time; a slow or failing target holds
    /// up only its own slot. `now_ms` stamps what arrives.
    pub async fn scrape_all(&mut self, now_ms: UnixMs) -> RoundStats {
        self.scrape_due(now_ms, Duration::ZERO).await
    }

    /// Scrapes the targets that are due at `now_ms` for a round `interval`: healthy ones
    /// every round, failing ones after their backoff (doubling per failure, up to
    /// [`crate::telemetry::scrape::MAX_BACKOFF`]), so a dead exporter costs one attempt now and then.
    pub async fn scrape_due(&mut self, now_ms: UnixMs, interval: Duration) -> RoundStats {
        let round = self.plan(now_ms, interval);
        let results = round.fetch().await;
        self.apply(results, now_ms)
    }

    /// The scrapes due at `now_ms`: what [`Round::fetch`] fetches without the `Ingest`
    /// (so the scrape task holds no lock while it waits on exporters).
    pub fn plan(&mut self, now_ms: UnixMs, interval: Duration) -> Round {
        let health = &self.health;
        let jitter = self.jitter;
        let started = *self.started_ms.get_or_insert(now_ms);
        let due = |url: &str, kind: Kind| {
            let interval = if kind == Kind::Fabric {
                interval.max(FABRIC_MIN_INTERVAL)
            } else {
                interval
            };
            match health.get(url) {
                None => true,
                Some(h) if jitter => match h.last_attempt_ms {
                    // First scrape at this target's phase after the first round.
                    None => now_ms >= started + phase_ms(url, interval),
                    Some(_) => h.next_due_ms(interval) <= now_ms,
                },
                // Every round while healthy (an NMX-T reading no more often than its
                // interval); after failures, past the backoff.
                Some(h) if kind == Kind::Fabric => h.next_due_ms(interval) <= now_ms,
                Some(h) => h.consecutive_failures == 0 || h.next_due_ms(interval) <= now_ms,
            }
        };
        let jobs: Vec<(String, String, Kind)> = self
            .targets
            .iter()
            .flat_map(|t| t.urls().map(|(u, k)| (t.node.clone(), u.clone(), k)))
            .chain(
                self.rack_targets
                    .iter()
                    .map(|t| (t.rack.clone(), t.url.clone(), t.kind)),
            )
            .filter(|(_, url, kind)| due(url, *kind))
            .collect();
        Round {
            client: self.client.clone(),
            concurrency: self.concurrency,
            jobs,
        }
    }

    /// Takes a round's answers: decodes bodies into the latest readings, records health.
    pub fn apply(&mut self, results: Vec<Fetched>, now_ms: UnixMs) -> RoundStats {
        let mut stats = RoundStats {
            targets: results.len(),
            ..RoundStats::default()
        };
        for Fetched {
            node,
            url,
            kind,
            result,
            took,
        } in results
        {
            let outcome = match result {
                Ok(body) => {
                    let (samples, errors) = self.take(&node, kind, &body, now_ms);
                    stats.samples += samples;
                    stats.line_errors += errors;
                    Ok(samples)
                }
                Err(e) => {
                    stats.failed += 1;
                    Err(e)
                }
            };
            // A target removed while its scrape was in flight has no health any more.
            if let Some(h) = self.health.get_mut(&url) {
                match &outcome {
                    Ok(n) => h.record(now_ms, took, Ok(*n)),
                    Err(e) => h.record(now_ms, took, Err(e)),
                }
            }
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::ingest::{NodeTarget, PowerMapping};

    #[tokio::test]
    async fn failing_targets_wait_their_backoff() {
        // A port nobody listens on: every attempt fails at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let url = format!("http://{closed}/metrics");
        let t = vec![NodeTarget {
            node: "n1".into(),
            gpu_url: url.clone(),
            bmc_url: url.clone() + "?bmc",
            node_url: None,
        }];
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            t,
            PowerMapping::default(),
            4,
        );
        let i = Duration::from_secs(1);
        assert_eq!(ing.scrape_due(0, i).await.targets, 2);
        // Failed once: not due again until 2 s later.
        assert_eq!(ing.scrape_due(1_000, i).await.targets, 0);
        assert_eq!(ing.scrape_due(2_000, i).await.targets, 2);
        // Failed twice: 4 s.
        assert_eq!(ing.scrape_due(4_000, i).await.targets, 0);
        assert_eq!(ing.scrape_due(6_000, i).await.targets, 2);
        assert!(ing.health().iter().all(|h| h.consecutive_failures == 3));
    }

    #[test]
    fn jitter_spreads_targets_over_the_interval() {
        let i = Duration::from_secs(10);
        let phases: Vec<i64> = (0..64)
            .map(|n| phase_ms(&format!("http://gpu{n:03}:9400/metrics"), i))
            .collect();
        assert!(phases.iter().all(|p| (0..10_000).contains(p)));
        // Spread: every 2.5 s quarter of the interval holds some targets.
        for q in 0..4 {
            assert!(
                phases.iter().any(|p| p / 2_500 == q),
                "quarter {q} empty: {phases:?}"
            );
        }
        assert_eq!(
            phase_ms("http://a/metrics", i),
            phase_ms("http://a/metrics", i),
            "stable"
        );
    }

    #[tokio::test]
    async fn with_jitter_every_target_is_first_scraped_within_one_interval() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let targets: Vec<NodeTarget> = (0..20)
            .map(|n| NodeTarget {
                node: format!("n{n}"),
                gpu_url: format!("http://{closed}/gpu{n}"),
                bmc_url: format!("http://{closed}/bmc{n}"),
                node_url: None,
            })
            .collect();
        let mut ing = Ingest::new(
            Client::new(
                Default::default(),
                crate::tls::client_config(None).expect("tls"),
            ),
            targets,
            PowerMapping::default(),
            8,
        )
        .with_jitter();
        let i = Duration::from_secs(10);
        // Ticks every 3 s never line up with every phase; still, all 40 start within 10 s.
        let mut first_round = 0;
        for t in [0, 3_000, 6_000, 9_000, 10_000] {
            first_round += ing.scrape_due(t, i).await.targets;
        }
        assert_eq!(first_round, 40);
        assert!(ing.health().iter().all(|h| h.last_attempt_ms.is_some()));
    }
}
