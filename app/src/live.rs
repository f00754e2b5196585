//! Wire types of the live overview and the snapshot/delta protocol spoken over
//! server-sent events.
//!
//! The server sends one `snapshot` event on connect, then one `delta` event per tick that
//! carries only what changed. A client that misses a delta (a sequence gap) discards its
//! state and waits for the snapshot that the server sends after any gap. Pure: no I/O.

use serde::{Deserialize, Serialize};

use crate::model::{Cooling, UnixMs};

/// GPUs by what they can do now. `allocated + idle + drained + down == total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCounts {
    pub total: u32,
    pub allocated: u32,
    pub idle: u32,
    /// On drained or draining nodes and not allocated.
    pub drained: u32,
    /// On down, not responding or maintenance nodes.
    pub down: u32,
}

/// The cluster-wide numbers of the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub gpus: GpuCounts,
    /// Mean SM activity over allocated GPUs with a reading, 0.0 to 1.0.
    pub sm_active_mean: Option<f64>,
    /// Sum of rack PDU power (or of GPU power where a rack has no PDU reading).
    pub power_watts: f64,
    /// Sum of rack power limits.
    pub power_capacity_watts: f64,
    pub gpus_throttling: u32,
    pub jobs_running: u32,
    pub jobs_pending: u32,
}

/// One rack of the mini-map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RackTile {
    pub name: String,
    pub row: String,
    pub position: u32,
    pub power_watts: Option<f64>,
    pub power_limit_watts: f64,
    pub inlet_celsius: Option<f64>,
    pub cooling: Cooling,
    pub gpus_throttling: u32,
    pub nodes_unavailable: u32,
    /// Nodes up in the scheduler whose power reading is missing or stale: the rack's
    /// power is then a lower bound, and says so.
    #[serde(default)]
    pub nodes_not_reporting: u32,
}

impl RackTile {
    /// Power as a share of the limit, if known.
    pub fn load_ratio(&self) -> Option<f64> {
        self.power_watts
            .filter(|_| self.power_limit_watts > 0.0)
            .map(|p| p / self.power_limit_watts)
    }

    /// The rack's severity for colour: over its power limit or inlet limit is critical,
    /// above 90% of its power limit or throttling GPUs is a warning.
    pub fn severity(&self) -> Severity {
        match self.load_ratio() {
            Some(r) if r > 1.0 => Severity::Critical,
            Some(r) if r > 0.9 => Severity::Warning,
            _ if self.gpus_throttling > 0 || self.nodes_not_reporting > 0 => Severity::Warning,
            _ => Severity::Ok,
        }
    }
}

/// The fixed severity palette of the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Ok,
    Warning,
    Critical,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// Everything the overview page shows, as of `at_ms`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub cluster: String,
    /// Increases by one per tick; deltas name the sequence they lead to.
    pub seq: u64,
    /// When the readings behind these numbers were taken (source time: simulated time
    /// when the simulator is the source).
    pub at_ms: UnixMs,
    /// Wall-clock time at which the server published these numbers. Staleness is measured
    /// from this, never from `at_ms`, whose clock may not be the wall clock.
    pub published_ms: UnixMs,
    /// The live interval: a value older than two of these is stale.
    pub interval_ms: i64,
    pub summary: Summary,
    pub racks: Vec<RackTile>,
}

/// What changed between two overviews.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverviewDelta {
    /// The sequence this delta applies to.
    pub from_seq: u64,
    pub seq: u64,
    pub at_ms: UnixMs,
    pub published_ms: UnixMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Racks whose tile changed, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub racks: Vec<RackTile>,
}

/// Why a delta could not be applied; the client must wait for a snapshot.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("delta from sequence {delta_from} does not follow sequence {have}")]
    Gap { have: u64, delta_from: u64 },
    #[error("delta names rack {0}, which the snapshot does not have")]
    UnknownRack(String),
}

impl Overview {
    /// The delta that turns `self` into `next`.
    pub fn diff(&self, next: &Overview) -> OverviewDelta {
        let racks = next
            .racks
            .iter()
            .filter(|r| self.racks.iter().find(|o| o.name == r.name) != Some(*r))
            .cloned()
            .collect();
        OverviewDelta {
            from_seq: self.seq,
            seq: next.seq,
            at_ms: next.at_ms,
            published_ms: next.published_ms,
            summary: (self.summary != next.summary).then(|| next.summary.clone()),
            racks,
        }
    }

    /// Applies a delta in place; on error `self` is unchanged.
    pub fn apply(&mut self, delta: &OverviewDelta) -> Result<(), ApplyError> {
        if delta.from_seq != self.seq {
            return Err(ApplyError::Gap {
                have: self.seq,
                delta_from: delta.from_seq,
            });
        }
        let mut idx = Vec::with_capacity(delta.racks.len());
        for r in &delta.racks {
            let i = self
                .racks
                .iter()
                .position(|o| o.name == r.name)
                .ok_or_else(|| ApplyError::UnknownRack(r.name.clone()))?;
            idx.push(i);
        }
        for (i, r) in idx.into_iter().zip(&delta.racks) {
            self.racks[i] = r.clone();
        }
        if let Some(s) = &delta.summary {
            self.summary = s.clone();
        }
        self.seq = delta.seq;
        self.at_ms = delta.at_ms;
        self.published_ms = delta.published_ms;
        Ok(())
    }

    /// Whether these numbers were published more than two live intervals before `now_ms`
    /// (wall clock).
    pub fn is_stale(&self, now_ms: UnixMs) -> bool {
        now_ms - self.published_ms > 2 * self.interval_ms.max(1)
    }
}

/// An overview with the server's clock at the moment it was sent, so the client can tell
/// how old the data was on arrival without trusting its own clock against the server's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    pub server_now_ms: UnixMs,
    pub overview: Overview,
}

/// Names of the SSE events on `/api/live`.
pub const EVENT_SNAPSHOT: &str = "snapshot";
pub const EVENT_DELTA: &str = "delta";

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(name: &str, power: f64) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            position: 0,
            power_watts: Some(power),
            power_limit_watts: 40_000.0,
            inlet_celsius: Some(24.0),
            cooling: Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
        }
    }

    fn overview(seq: u64, p1: f64, p2: f64, running: u32) -> Overview {
        Overview {
            cluster: "sim".into(),
            seq,
            at_ms: 1000 * seq as i64,
            published_ms: 5000 + 1000 * seq as i64,
            interval_ms: 1000,
            summary: Summary {
                jobs_running: running,
                ..Summary::default()
            },
            racks: vec![tile("A01", p1), tile("A02", p2)],
        }
    }

    #[test]
    fn delta_carries_only_what_changed_and_applies_exactly() {
        let a = overview(1, 30_000.0, 31_000.0, 5);
        let b = overview(2, 30_000.0, 32_500.0, 5);
        let d = a.diff(&b);
        assert_eq!(d.summary, None);
        assert_eq!(d.racks.len(), 1);
        assert_eq!(d.racks[0].name, "A02");
        let mut c = a.clone();
        c.apply(&d).expect("applies");
        assert_eq!(c, b);
    }

    #[test]
    fn a_gap_is_refused_and_leaves_state_alone() {
        let a = overview(1, 1.0, 2.0, 1);
        let c = overview(3, 1.0, 2.0, 2);
        let d = overview(2, 1.0, 2.0, 1).diff(&c);
        let mut x = a.clone();
        assert_eq!(
            x.apply(&d),
            Err(ApplyError::Gap {
                have: 1,
                delta_from: 2
            })
        );
        assert_eq!(x, a);
    }

    #[test]
    fn unknown_rack_is_refused_atomically() {
        let a = overview(1, 1.0, 2.0, 1);
        let mut d = a.diff(&overview(2, 5.0, 2.0, 9));
        d.racks.push(tile("Z99", 1.0));
        let mut x = a.clone();
        assert!(matches!(x.apply(&d), Err(ApplyError::UnknownRack(_))));
        assert_eq!(x, a);
    }

    #[test]
    fn staleness_is_two_intervals() {
        let a = overview(5, 1.0, 2.0, 1);
        assert!(!a.is_stale(a.published_ms + 2000));
        assert!(a.is_stale(a.published_ms + 2001));
    }

    #[test]
    fn severity_from_power_against_limit() {
        assert_eq!(tile("x", 30_000.0).severity(), Severity::Ok);
        assert_eq!(tile("x", 37_000.0).severity(), Severity::Warning);
        assert_eq!(tile("x", 41_000.0).severity(), Severity::Critical);
        let mut t = tile("x", 10_000.0);
        t.gpus_throttling = 3;
        assert_eq!(t.severity(), Severity::Warning);
        t.gpus_throttling = 0;
        t.nodes_not_reporting = 1;
        assert_eq!(t.severity(), Severity::Warning);
        t.power_watts = None;
        assert_eq!(t.load_ratio(), None);
    }
}
