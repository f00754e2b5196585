//! The hot window: the last hour of readings in memory, per GPU, node, rack, switch domain
//! and cluster,
//! at a fixed resolution (a point is taken when at least one resolution has passed since
//! the last; readings in between are skipped).
//!
//! Every series is a ring of `f32` allocated once (missing = NaN), so memory is
//! `series x points x 4 bytes` plus one shared ring of slot times, known up front and
//! never growing with time. Pure: time is a parameter.

use std::collections::HashMap;

use app::live::Overview;
use app::model::{Inventory, UnixMs};

use crate::telemetry::Readings;

/// What a series measures.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    PowerWatts,
    TempCelsius,
    SmActiveRatio,
    SmClockMhz,
    InletCelsius,
    GpusThrottling,
}

impl Metric {
    /// Every metric's name, as `parse` takes them.
    pub const NAMES: [&'static str; 6] = [
        "power_watts",
        "temp_celsius",
        "sm_active_ratio",
        "sm_clock_mhz",
        "inlet_celsius",
        "gpus_throttling",
    ];

    pub fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "power_watts" => Metric::PowerWatts,
            "temp_celsius" => Metric::TempCelsius,
            "sm_active_ratio" => Metric::SmActiveRatio,
            "sm_clock_mhz" => Metric::SmClockMhz,
            "inlet_celsius" => Metric::InletCelsius,
            "gpus_throttling" => Metric::GpusThrottling,
            _ => return None,
        })
    }
}

/// Whose series it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Cluster,
    Rack(String),
    /// A switch domain: NVLink domain, leaf or spine switch, Slurm block.
    Domain(String),
    Node(String),
    Gpu(String, u32),
}

impl Scope {
    /// `cluster`, `rack:A01`, `domain:leaf01`, `node:gpu001`, `gpu:gpu001:3`.
    pub fn parse(s: &str) -> Option<Scope> {
        if let Some(d) = s.strip_prefix("domain:") {
            return (!d.is_empty()).then(|| Scope::Domain(d.into()));
        }
        let mut parts = s.splitn(3, ':');
        Some(match (parts.next()?, parts.next(), parts.next()) {
            ("cluster", None, None) => Scope::Cluster,
            ("rack", Some(r), None) if !r.is_empty() => Scope::Rack(r.into()),
            ("node", Some(n), None) if !n.is_empty() => Scope::Node(n.into()),
            ("gpu", Some(n), Some(i)) if !n.is_empty() => Scope::Gpu(n.into(), i.parse().ok()?),
            _ => return None,
        })
    }
}

/// The window.
pub struct HotWindow {
    resolution_ms: i64,
    points: usize,
    /// Index of the newest slot; `len` slots are filled.
    head: usize,
    len: usize,
    times: Vec<UnixMs>,
    /// Each series' ring in `rings`.
    series: HashMap<(Scope, Metric), usize>,
    rings: Vec<Vec<f32>>,
    /// The rings of the last push's GPUs, nodes and node tiles, in the order they came:
    /// the next push, in the same order, writes by index after comparing names, instead
    /// of building and hashing a key per GPU and metric.
    gpu_slots: Vec<((String, u32), [usize; 4])>,
    node_slots: Vec<(String, usize)>,
    tile_slots: Vec<(String, [usize; 3])>,
}

/// The ring of `(scope, metric)`, made (all missing) the first time.
fn slot(
    series: &mut HashMap<(Scope, Metric), usize>,
    rings: &mut Vec<Vec<f32>>,
    points: usize,
    scope: Scope,
    metric: Metric,
) -> usize {
    let next = rings.len();
    *series.entry((scope, metric)).or_insert_with(|| {
        rings.push(vec![f32::NAN; points]);
        next
    })
}

/// Keeps `cache[i]` for the entry named `name` (made by `make` when the name there
/// differs) and returns it.
fn cached<K, S: Copy>(
    cache: &mut Vec<(K, S)>,
    i: usize,
    key: impl FnOnce() -> K,
    same: impl Fn(&K) -> bool,
    make: impl FnOnce() -> S,
) -> S {
    if let Some((k, s)) = cache.get(i) {
        if same(k) {
            return *s;
        }
    }
    let s = make();
    if i < cache.len() {
        cache[i] = (key(), s);
    } else {
        cache.push((key(), s));
    }
    s
}

fn value(v: Option<f64>) -> f32 {
    v.map(|x| x as f32).unwrap_or(f32::NAN)
}

impl HotWindow {
    /// A window of `span_ms` at `resolution_ms` per point.
    pub fn new(span_ms: i64, resolution_ms: i64) -> HotWindow {
        let resolution_ms = resolution_ms.max(1);
        let points = (span_ms / resolution_ms).max(1) as usize;
        HotWindow {
            resolution_ms,
            points,
            head: 0,
            len: 0,
            times: vec![0; points],
            series: HashMap::new(),
            rings: Vec::new(),
            gpu_slots: Vec::new(),
            node_slots: Vec::new(),
            tile_slots: Vec::new(),
        }
    }

    /// Bytes held by the rings (the bound the window keeps).
    pub fn memory_bytes(&self) -> usize {
        self.rings.len() * self.points * std::mem::size_of::<f32>()
            + self.points * std::mem::size_of::<UnixMs>()
    }

    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Takes one instant's readings and overview, if `at_ms` starts a new slot; `inv`
    /// (when known) says which nodes make each switch domain.
    pub fn push(
        &mut self,
        at_ms: UnixMs,
        readings: &Readings,
        overview: &Overview,
        inv: Option<&Inventory>,
    ) -> bool {
        if self.len > 0 && at_ms < self.times[self.head] + self.resolution_ms {
            return false;
        }
        self.head = if self.len == 0 {
            0
        } else {
            (self.head + 1) % self.points
        };
        self.len = (self.len + 1).min(self.points);
        self.times[self.head] = at_ms;
        let (head, points) = (self.head, self.points);
        // Every known series gets a point this slot: missing unless written below.
        for ring in &mut self.rings {
            ring[head] = f32::NAN;
        }
        let (series, rings) = (&mut self.series, &mut self.rings);
        for (i, g) in readings.gpus.iter().enumerate() {
            let s = cached(
                &mut self.gpu_slots,
                i,
                || (g.node.clone(), g.index),
                |(n, ix)| *n == g.node && *ix == g.index,
                || {
                    [
                        Metric::PowerWatts,
                        Metric::TempCelsius,
                        Metric::SmActiveRatio,
                        Metric::SmClockMhz,
                    ]
                    .map(|m| {
                        slot(
                            series,
                            rings,
                            points,
                            Scope::Gpu(g.node.clone(), g.index),
                            m,
                        )
                    })
                },
            );
            let v = [
                g.power_watts,
                g.temp_celsius,
                g.sm_active_ratio,
                g.sm_clock_mhz,
            ];
            for (k, v) in s.into_iter().zip(v) {
                rings[k][head] = value(v);
            }
        }
        self.gpu_slots.truncate(readings.gpus.len());
        for (i, n) in readings.nodes.iter().enumerate() {
            let name = &n.name;
            let k = cached(
                &mut self.node_slots,
                i,
                || name.clone(),
                |n| n == name,
                || {
                    slot(
                        series,
                        rings,
                        points,
                        Scope::Node(name.clone()),
                        Metric::PowerWatts,
                    )
                },
            );
            rings[k][head] = value(n.power_watts);
        }
        self.node_slots.truncate(readings.nodes.len());
        // Per node from the overview's tiles: the hottest GPU, mean SM activity, throttling.
        for (i, n) in overview.nodes.iter().enumerate() {
            let s = cached(
                &mut self.tile_slots,
                i,
                || n.name.clone(),
                |x| *x == n.name,
                || {
                    [
                        Metric::TempCelsius,
                        Metric::SmActiveRatio,
                        Metric::GpusThrottling,
                    ]
                    .map(|m| slot(series, rings, points, Scope::Node(n.name.clone()), m))
                },
            );
            let v = [
                n.gpu_temp_max_celsius,
                n.sm_active_mean,
                Some(f64::from(n.gpus_throttling)),
            ];
            for (k, v) in s.into_iter().zip(v) {
                rings[k][head] = value(v);
            }
        }
        self.tile_slots.truncate(overview.nodes.len());
        let mut put = |scope: Scope, metric: Metric, v: Option<f64>| {
            let k = slot(series, rings, points, scope, metric);
            rings[k][head] = value(v);
        };
        for r in &overview.racks {
            put(
                Scope::Rack(r.name.clone()),
                Metric::PowerWatts,
                r.power_watts,
            );
            put(
                Scope::Rack(r.name.clone()),
                Metric::InletCelsius,
                r.inlet_celsius,
            );
            put(
                Scope::Rack(r.name.clone()),
                Metric::GpusThrottling,
                Some(f64::from(r.gpus_throttling)),
            );
        }
        // Per switch domain: its nodes' power and GPUs throttling summed, its SM activity
        // as the overview computed it. A domain with no node reporting power has none.
        if let Some(inv) = inv {
            let tile: HashMap<&str, &app::live::NodeTile> = overview
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), n))
                .collect();
            // A one-node domain (an HGX board's NVSwitch) is its node's series already.
            let tree = inv.domain_tree();
            for d in &inv.domains {
                let members = tree.nodes(d);
                if members.len() < 2 {
                    continue;
                }
                let (mut power, mut seen, mut thr) = (0.0, false, 0u32);
                for n in members.iter().filter_map(|n| tile.get(n)) {
                    if let Some(p) = n.power_watts {
                        power += p;
                        seen = true;
                    }
                    thr += n.gpus_throttling;
                }
                let scope = || Scope::Domain(d.name.clone());
                put(scope(), Metric::PowerWatts, seen.then_some(power));
                put(scope(), Metric::GpusThrottling, Some(f64::from(thr)));
            }
            for d in &overview.domains {
                put(
                    Scope::Domain(d.name.clone()),
                    Metric::SmActiveRatio,
                    d.sm_active_mean,
                );
            }
        }
        let s = &overview.summary;
        put(Scope::Cluster, Metric::PowerWatts, Some(s.power_watts));
        put(Scope::Cluster, Metric::SmActiveRatio, s.sm_active_mean);
        put(
            Scope::Cluster,
            Metric::GpusThrottling,
            Some(f64::from(s.gpus_throttling)),
        );
        true
    }

    /// The series' points with `at_ms >= from_ms`, oldest first; `None` for missing. An
    /// unknown series is `None`.
    pub fn query(
        &self,
        scope: &Scope,
        metric: Metric,
        from_ms: UnixMs,
    ) -> Option<Vec<(UnixMs, Option<f32>)>> {
        let ring = &self.rings[*self.series.get(&(scope.clone(), metric))?];
        let oldest = (self.head + self.points + 1 - self.len) % self.points;
        Some(
            (0..self.len)
                .map(|k| (oldest + k) % self.points)
                .filter(|&i| self.times[i] >= from_ms)
                .map(|i| (self.times[i], Some(ring[i]).filter(|v| !v.is_nan())))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Sim;

    const T0: i64 = 1_795_968_000_000;

    fn step(sim: &mut Sim, w: &mut HotWindow, t: i64) -> Overview {
        sim.advance_to(t);
        let r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, t);
        w.push(t, &r, &ov, Some(sim.inventory()));
        ov
    }

    /// The rings are found by index while GPUs come in the same order; in another order,
    /// or with one missing, every value still lands in its own GPU's series.
    #[test]
    fn readings_in_another_order_land_in_their_own_series() {
        let mut sim = Sim::new(16, 3, "t", T0);
        let mut w = HotWindow::new(600_000, 10_000);
        step(&mut sim, &mut w, T0);
        sim.advance_to(T0 + 10_000);
        let mut r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 2, 1000, T0 + 10_000);
        r.gpus.reverse();
        let gone = r.gpus.remove(3);
        w.push(T0 + 10_000, &r, &ov, Some(sim.inventory()));
        for g in r.gpus.iter().step_by(7) {
            let pts = w
                .query(&Scope::Gpu(g.node.clone(), g.index), Metric::TempCelsius, 0)
                .expect("series");
            assert_eq!(
                pts[1],
                (T0 + 10_000, g.temp_celsius.map(|t| t as f32)),
                "{} {}",
                g.node,
                g.index
            );
        }
        let pts = w
            .query(
                &Scope::Gpu(gone.node.clone(), gone.index),
                Metric::PowerWatts,
                0,
            )
            .expect("series");
        assert_eq!(
            pts[1],
            (T0 + 10_000, None),
            "a GPU not in the readings is missing"
        );
        // And back in the first order.
        sim.advance_to(T0 + 20_000);
        let r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 3, 1000, T0 + 20_000);
        w.push(T0 + 20_000, &r, &ov, Some(sim.inventory()));
        for g in r.gpus.iter().step_by(5) {
            let pts = w
                .query(&Scope::Gpu(g.node.clone(), g.index), Metric::SmClockMhz, 0)
                .expect("series");
            assert_eq!(pts[2].1, g.sm_clock_mhz.map(|t| t as f32));
        }
    }

    #[test]
    fn one_point_per_slot_and_the_window_wraps() {
        let mut sim = Sim::new(16, 1, "t", T0);
        let mut w = HotWindow::new(60_000, 10_000); // 6 points
        for s in 0..25 {
            step(&mut sim, &mut w, T0 + s * 3_000); // 3 s ticks into 10 s slots
        }
        let pts = w
            .query(&Scope::Cluster, Metric::PowerWatts, 0)
            .expect("series");
        let times: Vec<i64> = pts.iter().map(|p| (p.0 - T0) / 1000).collect();
        // A point is taken when at least 10 s passed since the last one: 0, 12, 24, ... 72;
        // the window keeps the newest 6.
        assert_eq!(times, vec![12, 24, 36, 48, 60, 72]);
        let ov = step(&mut sim, &mut w, T0 + 84_000);
        let pts = w
            .query(&Scope::Cluster, Metric::PowerWatts, 0)
            .expect("series");
        assert_eq!(pts.len(), 6);
        assert_eq!(
            pts.last().and_then(|p| p.1),
            Some(ov.summary.power_watts as f32)
        );
        assert_eq!(
            w.query(&Scope::Cluster, Metric::PowerWatts, T0 + 60_000)
                .map(|p| p.len()),
            Some(3)
        );
    }

    #[test]
    fn per_gpu_node_and_rack_series_with_missing_as_none() {
        let mut sim = Sim::new(64, 2, "t", T0);
        let mut w = HotWindow::new(3_600_000, 10_000);
        let ov = step(&mut sim, &mut w, T0);
        let rack = &ov.racks[0];
        let got = w
            .query(&Scope::Rack(rack.name.clone()), Metric::PowerWatts, 0)
            .expect("rack");
        assert_eq!(got, vec![(T0, rack.power_watts.map(|p| p as f32))]);
        assert!(w
            .query(&Scope::Gpu("gpu001".into(), 7), Metric::TempCelsius, 0)
            .is_some());
        // The down node (gpu061) reports nothing: its points are missing, not zero.
        let down = w
            .query(&Scope::Gpu("gpu061".into(), 0), Metric::PowerWatts, 0)
            .expect("series");
        assert_eq!(down, vec![(T0, None)]);
        assert!(w
            .query(&Scope::Node("nope".into()), Metric::PowerWatts, 0)
            .is_none());
        // A switch domain's power is its nodes' power.
        let inv = sim.inventory();
        let leaf = inv
            .domains
            .iter()
            .find(|d| d.kind == app::model::DomainKind::Leaf)
            .expect("a leaf");
        let want: f64 = ov
            .nodes
            .iter()
            .filter(|n| leaf.nodes.contains(&n.name))
            .filter_map(|n| n.power_watts)
            .sum();
        let got = w
            .query(&Scope::Domain(leaf.name.clone()), Metric::PowerWatts, 0)
            .expect("domain");
        assert_eq!(got, vec![(T0, Some(want as f32))]);
        assert!(w
            .query(&Scope::Domain(leaf.name.clone()), Metric::SmActiveRatio, 0)
            .is_some());
        // 512 GPUs x 4 + 64 nodes + 8 racks x 3 + 3 cluster series, and per switch domain
        // power, throttling and SM activity (domains of more than one node), 360 points
        // each.
        let multi = ov.domains.len();
        assert_eq!(
            w.series_count(),
            512 * 4 + 64 + 64 * 3 + 8 * 3 + 3 + multi * 3
        );
        assert_eq!(w.memory_bytes(), w.series_count() * 360 * 4 + 360 * 8);
    }

    #[test]
    fn scopes_and_metrics_parse() {
        assert_eq!(Scope::parse("cluster"), Some(Scope::Cluster));
        assert_eq!(Scope::parse("rack:A01"), Some(Scope::Rack("A01".into())));
        assert_eq!(
            Scope::parse("domain:leaf:01"),
            Some(Scope::Domain("leaf:01".into()))
        );
        assert_eq!(
            Scope::parse("gpu:gpu001:3"),
            Some(Scope::Gpu("gpu001".into(), 3))
        );
        for bad in [
            "",
            "rack",
            "rack:",
            "gpu:gpu001",
            "gpu:gpu001:x",
            "cluster:x",
            "disk:a",
            "domain:",
        ] {
            assert_eq!(Scope::parse(bad), None, "{bad}");
        }
        assert_eq!(Metric::parse("power_watts"), Some(Metric::PowerWatts));
        assert_eq!(Metric::parse("watts"), None);
    }
}
