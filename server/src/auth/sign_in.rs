//! What bounds sign-in under attack: a failure throttle per client address and per user
//! name, checked before any password is hashed, and a small pool of threads that do all
//! the argon2 work, with a bounded queue.
//!
//! A flood of wrong passwords then costs at most `hash_threads` cores and
//! `hash_threads` x the hash's memory (each thread reuses its own allocation), whatever
//! the rate: an address or a name past its free failures waits a backoff that doubles with
//! each failure (429 with `Retry-After`, no hashing), and when the queue is full a sign-in
//! is refused at once (503) instead of waiting. Work whose request has gone is skipped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries each map holds at most; past it the least-failed half is forgotten.
const MAX_ENTRIES: usize = 65_536;
/// A key with no failure for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The throttle's settings.
#[derive(Clone, Copy, Debug)]
pub struct ThrottlePolicy {
    /// Failures allowed before the backoff starts (per address and per name).
    pub free_failures: u32,
    /// The first wait; it doubles with each further failure.
    pub base: Duration,
    /// The longest wait.
    pub max: Duration,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    last: Instant,
    not_before: Instant,
}

/// The key of a client address: IPv6 clients by their /64 (one host owns one).
fn addr_key(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => a,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

struct Map<K> {
    entries: HashMap<K, Entry>,
}

impl<K: std::hash::Hash + Eq + Clone> Map<K> {
    fn wait(&self, k: &K, now: Instant) -> Option<Duration> {
        let e = self.entries.get(k)?;
        (e.not_before > now).then(|| e.not_before - now)
    }

    fn fail(&mut self, k: K, now: Instant, p: &ThrottlePolicy) {
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&k) {
            self.entries
                .retain(|_, e| now.duration_since(e.last) < FORGET_AFTER);
            if self.entries.len() >= MAX_ENTRIES {
                let mut counts: Vec<u32> = self.entries.values().map(|e| e.failures).collect();
                let mid = counts.len() / 2;
                let (_, median, _) = counts.select_nth_unstable(mid);
                let median = *median;
                self.entries.retain(|_, e| e.failures > median);
            }
        }
        let e = self.entries.entry(k).or_insert(Entry {
            failures: 0,
            last: now,
            not_before: now,
        });
        if now.duration_since(e.last) >= FORGET_AFTER {
            e.failures = 0;
        }
        e.failures = e.failures.saturating_add(1);
        e.last = now;
        if e.failures > p.free_failures {
            let doublings = (e.failures - p.free_failures - 1).min(30);
            let wait = p.base.saturating_mul(1u32 << doublings).min(p.max);
            e.not_before = now + wait;
        }
    }

    fn clear(&mut self, k: &K) {
        self.entries.remove(k);
    }
}

/// Failed sign-ins by client address and by user name.
pub struct Throttle {
    policy: ThrottlePolicy,
    by_addr: Mutex<Map<IpAddr>>,
    by_name: Mutex<Map<String>>,
}

impl Throttle {
    pub fn new(policy: ThrottlePolicy) -> Throttle {
        Throttle {
            policy,
            by_addr: Mutex::new(Map {
                entries: HashMap::new(),
            }),
            by_name: Mutex::new(Map {
                entries: HashMap::new(),
            }),
        }
    }

    fn name_key(name: &str) -> Option<String> {
        super::validate_user_name(name)
            .is_ok()
            .then(|| name.to_ascii_lowercase())
    }

    /// How long `addr` or `name` must still wait before trying again, if at all.
    pub fn wait(&self, addr: IpAddr, name: &str, now: Instant) -> Option<Duration> {
        let a = self.by_addr.lock().ok()?.wait(&addr_key(addr), now);
        let n = Self::name_key(name)
            .and_then(|k| self.by_name.lock().ok().and_then(|m| m.wait(&k, now)));
        a.max(n)
    }

    /// Counts a failed sign-in of `name` from `addr`.
    pub fn failed(&self, addr: IpAddr, name: &str, now: Instant) {
        if let Ok(mut m) = self.by_addr.lock() {
            m.fail(addr_key(addr), now, &self.policy);
        }
        if let Some(k) = Self::name_key(name) {
            if let Ok(mut m) = self.by_name.lock() {
                m.fail(k, now, &self.policy);
            }
        }
    }

    /// A sign-in of `name` from `addr` succeeded: both start afresh.
    pub fn succeeded(&self, addr: IpAddr, name: &str) {
        if let Ok(mut m) = self.by_addr.lock() {
            m.clear(&addr_key(addr));
        }
        if let Some(k) = Self::name_key(name) {
            if let Ok(mut m) = self.by_name.lock() {
                m.clear(&k);
            }
        }
    }

    /// Keys held, in both maps.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_addr.lock().map(|m| m.entries.len()).unwrap_or(0)
            + self.by_name.lock().map(|m| m.entries.len()).unwrap_or(0)
    }
}

/// The pool refused the work: its queue is full.
#[derive(Debug, thiserror::Error)]
#[error("sign-in is busy: too many sign-ins are being checked; try again in a moment")]
pub struct Busy;

type Work = Box<dyn FnOnce() + Send>;

/// Threads that do every argon2 hash and verification, behind a bounded queue.
pub struct HashPool {
    tx: mpsc::SyncSender<Work>,
}

impl HashPool {
    /// `threads` workers (at least one) and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> Arc<HashPool> {
        let (tx, rx) = mpsc::sync_channel::<Work>(queue);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("gantry-hash-{i}"))
                .spawn(move || loop {
                    // The lock is held only while taking a job, not while hashing.
                    let job = match rx.lock() {
                        Ok(r) => r.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(work) => work(),
                        // Every sender is gone: the pool was dropped.
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password hashing thread");
            }
        }
        Arc::new(HashPool { tx })
    }

    /// Runs `f` on a pool thread, unless the queue is full; `None` when the pool stopped.
    /// If the caller has gone by the time a thread takes the job, it is not run.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Option<T>, Busy> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let work: Work = Box::new(move || {
            if reply.is_closed() {
                return;
            }
            let _ = reply.send(f());
        });
        match self.tx.try_send(work) {
            Ok(()) => Ok(answer.await.ok()),
            Err(mpsc::TrySendError::Full(_)) => Err(Busy),
            Err(mpsc::TrySendError::Disconnected(_)) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ThrottlePolicy {
        ThrottlePolicy {
            free_failures: 3,
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }

    #[test]
    fn failures_back_off_per_address_and_per_name() {
        let t = Throttle::new(policy());
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(t.wait(a, "alice", now), None);
            t.failed(a, "alice", now);
        }
        // The free failures are used up: the fourth waits 1 s, then 2, 4, ...
        assert_eq!(t.wait(a, "alice", now), None);
        t.failed(a, "alice", now);
        assert_eq!(t.wait(a, "bob", now), Some(Duration::from_secs(1)));
        // The name is throttled from any address, case-insensitively.
        assert_eq!(t.wait(b, "ALICE", now), Some(Duration::from_secs(1)));
        assert_eq!(t.wait(b, "bob", now), None);
        let later = now + Duration::from_secs(1);
        assert_eq!(t.wait(a, "alice", later), None);
        t.failed(a, "alice", later);
        assert_eq!(t.wait(a, "alice", later), Some(Duration::from_secs(2)));
        for i in 0..20 {
            t.failed(a, "alice", later + Duration::from_secs(i));
        }
        let w = t.wait(a, "alice", later + Duration::from_secs(19));
        assert_eq!(w, Some(Duration::from_secs(60)), "capped");
        // Success clears both keys; an hour without failures forgets them too.
        t.succeeded(a, "alice");
        assert_eq!(t.wait(a, "alice", later), None);
    }

    #[test]
    fn ipv6_clients_count_by_their_64_and_the_maps_stay_bounded() {
        let t = Throttle::new(ThrottlePolicy {
            free_failures: 0,
            ..policy()
        });
        let now = Instant::now();
        t.failed("2001:db8:1:2::1".parse().expect("ip"), "", now);
        assert!(t
            .wait("2001:db8:1:2:ffff::9".parse().expect("ip"), "", now)
            .is_some());
        assert!(t
            .wait("2001:db8:1:3::1".parse().expect("ip"), "", now)
            .is_none());
        for i in 0..(MAX_ENTRIES as u32 + 10) {
            t.failed(IpAddr::V4(i.into()), "", now);
        }
        assert!(t.len() <= MAX_ENTRIES, "{}", t.len());
    }

    #[tokio::test]
    async fn the_pool_refuses_when_its_queue_is_full() {
        let pool = HashPool::new(1, 1);
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let hold_rx = Arc::new(Mutex::new(hold_rx));
        // One job runs (blocked), one waits in the queue; the third is refused.
        let h = Arc::clone(&hold_rx);
        let p = Arc::clone(&pool);
        let first = tokio::spawn(async move {
            p.run(move || h.lock().map(|r| r.recv().is_ok()).unwrap_or(false))
                .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let p = Arc::clone(&pool);
        let second = tokio::spawn(async move { p.run(|| 2).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(pool.run(|| 3).await, Err(Busy)));
        hold_tx.send(()).expect("release");
        assert_eq!(first.await.expect("join").expect("ran"), Some(true));
        assert_eq!(second.await.expect("join").expect("ran"), Some(2));
        assert_eq!(pool.run(|| 4).await.expect("room again"), Some(4));
    }
}
