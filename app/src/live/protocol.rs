//! The overview as a whole and the snapshot/delta protocol: an [`Overview`], the
//! [`OverviewDelta`] between two ticks and how a client applies it, the snapshot the server
//! sends on connect and the ids a client resumes from. Pure.

use serde::{Deserialize, Serialize};

use super::*;
use crate::model::UnixMs;
#[cfg(test)]
use crate::model::{Cooling, NodeState};

/// Everything the live pages show, as of `at_ms`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
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
    /// The data halls, where the layout names them (the fleet level).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halls: Vec<HallTile>,
    pub racks: Vec<RackTile>,
    /// Every node, in inventory order.
    #[serde(default)]
    pub nodes: Vec<NodeTile>,
    /// Multi-node switch domains (leaves, spines, blocks, NVLink domains of several nodes).
    #[serde(default)]
    pub domains: Vec<DomainTile>,
    #[serde(default)]
    pub thermal: Thermal,
    #[serde(default)]
    pub fragmented: Vec<FragmentedJob>,
    /// Per block topology; empty without Slurm blocks that have sizes.
    #[serde(default)]
    pub segments: Vec<SegmentFree>,
    /// Running jobs holding GPUs idle past the hold, by job id.
    #[serde(default)]
    pub idle: Vec<crate::queue::IdleHeld>,
}

/// What changed between two overviews.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct OverviewDelta {
    /// The sequence this delta applies to.
    pub from_seq: u64,
    pub seq: u64,
    pub at_ms: UnixMs,
    pub published_ms: UnixMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The halls, whole, when any changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halls: Option<Vec<HallTile>>,
    /// Racks whose tile changed, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub racks: Vec<RackTile>,
    /// Nodes whose tile changed, by index, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<(u32, NodeTile)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<(u32, DomainTile)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal: Option<Thermal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmented: Option<Vec<FragmentedJob>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<SegmentFree>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Vec<crate::queue::IdleHeld>>,
}

/// Why a delta could not be applied; the client must wait for a snapshot.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("delta from sequence {delta_from} does not follow sequence {have}")]
    Gap { have: u64, delta_from: u64 },
    #[error("delta names rack {0}, which the snapshot does not have")]
    UnknownRack(String),
    #[error("delta names node or domain {0} at a place the snapshot does not have")]
    UnknownEntry(String),
}

/// Entries of `next` that differ from `prev` at the same index (all of them when the
/// lists differ in length: the client then gets a gap-free full replacement only through
/// a snapshot, see `Overview::diff`).
fn changed<T: Clone + PartialEq>(prev: &[T], next: &[T]) -> Vec<(u32, T)> {
    next.iter()
        .enumerate()
        .filter(|(i, t)| prev.get(*i) != Some(*t))
        .map(|(i, t)| (i as u32, t.clone()))
        .collect()
}

impl Overview {
    /// Who draws `rack`'s power: each running job with its share of the rack's reporting
    /// nodes' power (a node's power split evenly between the jobs on it), most first.
    pub fn rack_job_power(&self, rack: &str) -> Vec<(u64, f64)> {
        let mut by_job: Vec<(u64, f64)> = Vec::new();
        for n in self.nodes.iter().filter(|n| n.rack == rack) {
            let Some(p) = n.power_watts.filter(|_| !n.jobs.is_empty()) else {
                continue;
            };
            let share = p / n.jobs.len() as f64;
            for &j in &n.jobs {
                match by_job.iter_mut().find(|(id, _)| *id == j) {
                    Some(e) => e.1 += share,
                    None => by_job.push((j, share)),
                }
            }
        }
        by_job.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        by_job
    }

    /// The jobs running on any of `nodes`, by id, each once.
    pub fn jobs_on(&self, nodes: &[String]) -> Vec<u64> {
        let mut jobs: Vec<u64> = self
            .nodes
            .iter()
            .filter(|n| nodes.contains(&n.name))
            .flat_map(|n| n.jobs.iter().copied())
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

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
            halls: (self.halls != next.halls).then(|| next.halls.clone()),
            racks,
            nodes: changed(&self.nodes, &next.nodes),
            domains: changed(&self.domains, &next.domains),
            thermal: (self.thermal != next.thermal).then(|| next.thermal.clone()),
            fragmented: (self.fragmented != next.fragmented).then(|| next.fragmented.clone()),
            segments: (self.segments != next.segments).then(|| next.segments.clone()),
            idle: (self.idle != next.idle).then(|| next.idle.clone()),
        }
    }

    /// Whether a delta can carry the change to `next` (same nodes and domains in the same
    /// places); when not, the server sends a snapshot instead.
    pub fn same_shape(&self, next: &Overview) -> bool {
        self.nodes.len() == next.nodes.len()
            && self.domains.len() == next.domains.len()
            && self.racks.len() == next.racks.len()
            && self
                .nodes
                .iter()
                .zip(&next.nodes)
                .all(|(a, b)| a.name == b.name)
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
        for (i, n) in &delta.nodes {
            if self.nodes.get(*i as usize).is_none_or(|o| o.name != n.name) {
                return Err(ApplyError::UnknownEntry(n.name.clone()));
            }
        }
        for (i, d) in &delta.domains {
            if self
                .domains
                .get(*i as usize)
                .is_none_or(|o| o.name != d.name)
            {
                return Err(ApplyError::UnknownEntry(d.name.clone()));
            }
        }
        for (i, r) in idx.into_iter().zip(&delta.racks) {
            self.racks[i] = r.clone();
        }
        for (i, n) in &delta.nodes {
            self.nodes[*i as usize] = n.clone();
        }
        for (i, d) in &delta.domains {
            self.domains[*i as usize] = d.clone();
        }
        if let Some(t) = &delta.thermal {
            self.thermal = t.clone();
        }
        if let Some(f) = &delta.fragmented {
            self.fragmented = f.clone();
        }
        if let Some(f) = &delta.segments {
            self.segments = f.clone();
        }
        if let Some(f) = &delta.idle {
            self.idle = f.clone();
        }
        if let Some(s) = &delta.summary {
            self.summary = s.clone();
        }
        if let Some(h) = &delta.halls {
            self.halls = h.clone();
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
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct LiveSnapshot {
    pub server_now_ms: UnixMs,
    pub overview: Overview,
}

/// Names of the SSE events on `/api/live`.
pub const EVENT_SNAPSHOT: &str = "snapshot";
pub const EVENT_DELTA: &str = "delta";

/// What names an overview for resuming `/api/live` (`?since=` and the events' ids, which a
/// browser sends back as `Last-Event-ID`): its sequence and when it was published, so a
/// restarted server, counting sequences from 1 again, cannot take one for its own.
pub fn resume_id(o: &Overview) -> String {
    format!("{}-{}", o.seq, o.published_ms)
}

/// The sequence and publication time of a [`resume_id`]; `None` for anything else.
pub fn parse_resume_id(s: &str) -> Option<(u64, UnixMs)> {
    let (seq, at) = s.trim().split_once('-')?;
    Some((seq.parse().ok()?, at.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(name: &str, power: f64) -> RackTile {
        RackTile {
            name: name.into(),
            row: "A".into(),
            hall: String::new(),
            position: 0,
            power_watts: Some(power),
            power_limit_watts: 40_000.0,
            inlet_celsius: Some(24.0),
            cooling: Cooling::Air,
            gpus_throttling: 0,
            nodes_unavailable: 0,
            nodes_not_reporting: 0,
            gpu_temp_max_celsius: None,
            inlet_limit_celsius: 35.0,
            jobs: Vec::new(),
            coolant: None,
            placement: None,
            shelves: None,
            fabric: None,
            incident: None,
        }
    }

    fn node(name: &str, power: f64) -> NodeTile {
        NodeTile {
            name: name.into(),
            rack: "A01".into(),
            u_position: 1,
            u_height: 4,
            state: NodeState::Allocated,
            power_watts: Some(power),
            gpu_temp_max_celsius: Some(70.0),
            sm_active_mean: Some(0.8),
            gpus: 8,
            gpus_throttling: 0,
            jobs: vec![7],
            marks: 0,
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
            nodes: vec![node("gpu001", p1 / 8.0), node("gpu002", 5000.0)],
            ..Overview::default()
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
        assert!(d.nodes.is_empty(), "node power unchanged");
        let mut c = a.clone();
        c.apply(&d).expect("applies");
        assert_eq!(c, b);
        // A node's change travels by index and lands in its place.
        let e = overview(3, 40_000.0, 32_500.0, 5);
        let d = b.diff(&e);
        assert_eq!(d.nodes.len(), 1);
        assert_eq!(d.nodes[0].0, 0);
        c.apply(&d).expect("applies");
        assert_eq!(c, e);
        // Short keys on the wire.
        let json = serde_json::to_string(&d.nodes[0].1).expect("json");
        assert!(json.starts_with(r#"{"n":"gpu001","r":"A01""#), "{json}");
    }

    #[test]
    fn a_node_delta_for_another_shape_is_refused() {
        let a = overview(1, 1.0, 2.0, 1);
        let mut d = a.diff(&overview(2, 8.0, 2.0, 1));
        d.nodes[0].1.name = "gpu999".into();
        let mut x = a.clone();
        assert!(matches!(x.apply(&d), Err(ApplyError::UnknownEntry(_))));
        assert_eq!(x, a);
        assert!(a.same_shape(&overview(2, 8.0, 2.0, 1)));
        let mut other = overview(2, 8.0, 2.0, 1);
        other.nodes.pop();
        assert!(!a.same_shape(&other));
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

    #[test]
    fn resume_ids_round_trip_and_refuse_anything_else() {
        let o = Overview {
            seq: 57,
            published_ms: 1_795_968_000_123,
            ..Overview::default()
        };
        assert_eq!(resume_id(&o), "57-1795968000123");
        assert_eq!(
            parse_resume_id(&resume_id(&o)),
            Some((57, 1_795_968_000_123))
        );
        for bad in ["", "57", "57-", "-1", "x-1", "57-1-2", "57-1.5"] {
            assert_eq!(parse_resume_id(bad), None, "{bad}");
        }
    }
}
