//! Per-minute and per-hour rollups of live ticks (cluster, racks, running jobs), and the
//! count of throttled GPUs per reason that both take.

use std::collections::BTreeMap;

use app::live::Overview;
use app::model::UnixMs;

use crate::store::{Rollup, Rollup1h};
use crate::telemetry::Readings;

/// One scope's period so far.
#[derive(Clone, Debug, Default)]
struct PeriodAcc {
    power_sum: f64,
    power_min: f64,
    power_max: f64,
    energy_wh: f64,
    sm_sum: f64,
    sm_n: u32,
    thr_max: u32,
    thr_gpu_seconds: f64,
    thr_s_by_reason: [f64; 5],
    samples: u32,
}

impl PeriodAcc {
    fn power_mean(&self) -> f64 {
        self.power_sum / f64::from(self.samples.max(1))
    }

    fn sm_mean(&self) -> Option<f64> {
        (self.sm_n > 0).then(|| self.sm_sum / f64::from(self.sm_n))
    }
}

/// Live ticks accumulated per scope over fixed periods (a minute, an hour): power (mean,
/// min, max, energy integrated over each tick's duration), SM activity, throttling (max,
/// GPU-seconds in all and per reason). One mechanism behind both rollups.
struct Periods {
    period_ms: i64,
    /// Also accumulate each running job (`job:ID`, from its nodes).
    jobs: bool,
    start_ms: Option<UnixMs>,
    acc: BTreeMap<String, PeriodAcc>,
}

impl Periods {
    fn new(period_ms: i64, jobs: bool) -> Periods {
        Periods {
            period_ms,
            jobs,
            start_ms: None,
            acc: BTreeMap::new(),
        }
    }

    /// Adds one overview (and its throttling per reason) that stands for `dt_ms` of source
    /// time; returns the finished period (its start and scopes) when a boundary passed.
    fn add(
        &mut self,
        ov: &Overview,
        by_reason: &ReasonCounts,
        dt_ms: i64,
    ) -> Option<(UnixMs, BTreeMap<String, PeriodAcc>)> {
        let start = ov.at_ms - ov.at_ms.rem_euclid(self.period_ms);
        let done = match self.start_ms {
            Some(s) if s != start => Some((s, std::mem::take(&mut self.acc))),
            _ => None,
        };
        self.start_ms = Some(start);
        let dt_s = dt_ms.max(0) as f64 / 1000.0;
        let mut put = |scope: String, power: f64, sm: Option<f64>, thr: u32| {
            let e = self.acc.entry(scope).or_insert_with(|| PeriodAcc {
                power_min: f64::INFINITY,
                power_max: f64::NEG_INFINITY,
                ..PeriodAcc::default()
            });
            e.power_sum += power;
            e.power_min = e.power_min.min(power);
            e.power_max = e.power_max.max(power);
            e.energy_wh += power * dt_s / 3600.0;
            if let Some(s) = sm {
                e.sm_sum += s;
                e.sm_n += 1;
            }
            e.thr_max = e.thr_max.max(thr);
            e.thr_gpu_seconds += f64::from(thr) * dt_s;
            e.samples += 1;
        };
        put(
            "cluster".into(),
            ov.summary.power_watts,
            ov.summary.sm_active_mean,
            ov.summary.gpus_throttling,
        );
        for r in &ov.racks {
            if let Some(p) = r.power_watts {
                put(format!("rack:{}", r.name), p, None, r.gpus_throttling);
            }
        }
        if self.jobs {
            // Per running job, from its nodes: power, mean SM activity, GPUs throttling
            // (the job page's activity band).
            let mut jobs: BTreeMap<u64, (f64, f64, u32, u32)> = BTreeMap::new();
            for n in &ov.nodes {
                for &j in &n.jobs {
                    let e = jobs.entry(j).or_default();
                    e.0 += n.power_watts.unwrap_or(0.0);
                    if let Some(s) = n.sm_active_mean {
                        e.1 += s;
                        e.2 += 1;
                    }
                    e.3 += n.gpus_throttling;
                }
            }
            for (j, (p, sm, smn, thr)) in jobs {
                put(
                    format!("job:{j}"),
                    p,
                    (smn > 0).then(|| sm / f64::from(smn)),
                    thr,
                );
            }
        }
        // Per reason, for the scopes that have power this tick (the cluster always).
        for (scope, counts) in by_reason {
            if let Some(e) = self.acc.get_mut(scope) {
                for (acc, n) in e.thr_s_by_reason.iter_mut().zip(counts) {
                    *acc += f64::from(*n) * dt_s;
                }
            }
        }
        done
    }
}

/// Per-hour rollups of the cluster and each rack.
pub struct HourRollups(Periods);

impl Default for HourRollups {
    fn default() -> Self {
        HourRollups(Periods::new(3_600_000, false))
    }
}

/// GPUs throttled per reason (in the order of `aggregate::REASONS`; a GPU counts under each
/// of its reasons), for the cluster and each rack: counted once per tick by the source and
/// given to both rollups.
#[derive(Default)]
pub struct ReasonCounter {
    /// Node -> rack scope, rebuilt when the nodes change.
    rack_of: std::collections::HashMap<String, String>,
}

/// Scope (`cluster`, `rack:A01`) and its GPUs throttled per reason.
pub type ReasonCounts = Vec<(String, [u32; 5])>;

impl ReasonCounter {
    pub fn count(&mut self, ov: &Overview, r: &Readings) -> ReasonCounts {
        if self.rack_of.len() != ov.nodes.len() {
            self.rack_of = ov
                .nodes
                .iter()
                .map(|n| (n.name.clone(), format!("rack:{}", n.rack)))
                .collect();
        }
        let mut cluster = [0u32; 5];
        let mut racks: std::collections::HashMap<&str, [u32; 5]> = std::collections::HashMap::new();
        for g in &r.gpus {
            let Some(t) = g.throttle.filter(|t| t.is_throttling()) else {
                continue;
            };
            let rack = self.rack_of.get(&g.node).map(String::as_str);
            for (k, (bit, _)) in crate::aggregate::REASONS.iter().enumerate() {
                if t.0 & bit != 0 {
                    cluster[k] += 1;
                    if let Some(rack) = rack {
                        racks.entry(rack).or_default()[k] += 1;
                    }
                }
            }
        }
        let mut out = vec![("cluster".to_string(), cluster)];
        out.extend(racks.into_iter().map(|(k, v)| (k.to_string(), v)));
        out
    }
}

impl HourRollups {
    /// Adds one overview (and its throttling per reason) that stands for `dt_ms` of source
    /// time; returns the finished hour's rollups when an hour boundary passed.
    pub fn add(&mut self, ov: &Overview, by_reason: &ReasonCounts, dt_ms: i64) -> Vec<Rollup1h> {
        let Some((at_ms, scopes)) = self.0.add(ov, by_reason, dt_ms) else {
            return Vec::new();
        };
        scopes
            .into_iter()
            .map(|(scope, a)| Rollup1h {
                scope,
                at_ms,
                power_watts_mean: a.power_mean(),
                power_watts_min: a.power_min,
                power_watts_max: a.power_max,
                energy_wh: a.energy_wh,
                sm_active_mean: a.sm_mean(),
                gpus_throttling_max: a.thr_max,
                throttled_gpu_seconds: a.thr_gpu_seconds,
                throttled_s_by_reason: a.thr_s_by_reason,
                samples: a.samples,
            })
            .collect()
    }
}

/// Per-minute rollups of the cluster, each rack and each running job.
pub struct MinuteRollups(Periods);

impl Default for MinuteRollups {
    fn default() -> Self {
        MinuteRollups(Periods::new(60_000, true))
    }
}

impl MinuteRollups {
    /// Adds one overview (and its throttling per reason, standing for `dt_ms`); returns the
    /// finished minute's rollups when a minute boundary passed.
    pub fn add(&mut self, ov: &Overview, by_reason: &ReasonCounts, dt_ms: i64) -> Vec<Rollup> {
        let Some((at_ms, scopes)) = self.0.add(ov, by_reason, dt_ms) else {
            return Vec::new();
        };
        scopes
            .into_iter()
            .map(|(scope, a)| Rollup {
                scope,
                at_ms,
                power_watts_mean: a.power_mean(),
                sm_active_mean: a.sm_mean(),
                gpus_throttling_max: a.thr_max,
                throttled_s_by_reason: a.thr_s_by_reason,
                samples: a.samples,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(at_ms: UnixMs, power: f64, thr: u32) -> Overview {
        let mut o = Overview {
            at_ms,
            ..Overview::default()
        };
        o.summary.power_watts = power;
        o.summary.gpus_throttling = thr;
        o
    }

    #[test]
    fn a_minute_keeps_seconds_throttled_per_reason() {
        let mut m = MinuteRollups::default();
        let two_thermal = Readings {
            at_ms: 0,
            gpus: (0..2)
                .map(|i| app::model::GpuReading {
                    node: "n1".into(),
                    index: i,
                    throttle: Some(app::model::ThrottleReasons(
                        app::model::ThrottleReasons::SW_THERMAL,
                    )),
                    ..Default::default()
                })
                .collect(),
            ..Readings::default()
        };
        let mut reasons = ReasonCounter::default();
        let counts = reasons.count(&ov(0, 1000.0, 2), &two_thermal);
        // Three 20 s ticks with two GPUs thermally throttled, then the next minute.
        for t in [20_000, 40_000, 59_000] {
            assert!(m.add(&ov(t, 1000.0, 2), &counts, 20_000).is_empty());
        }
        let done = m.add(&ov(60_000, 1000.0, 0), &counts, 1_000);
        let c = done.iter().find(|r| r.scope == "cluster").expect("cluster");
        // HW thermal, SW thermal, SW power cap, HW slowdown, HW power brake.
        assert_eq!(c.throttled_s_by_reason, [0.0, 120.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn an_hour_rolls_up_mean_min_max_energy_and_throttled_time() {
        let h = 3_600_000;
        let third = h / 3;
        let mut hr = HourRollups::default();
        // `thr` GPUs throttling: the first for HW thermal and HW slowdown at once, the rest
        // for SW power cap.
        let readings = |thr: u32| Readings {
            at_ms: 0,
            gpus: (0..thr)
                .map(|i| app::model::GpuReading {
                    node: "n1".into(),
                    index: i,
                    throttle: Some(app::model::ThrottleReasons(if i == 0 {
                        app::model::ThrottleReasons::HW_THERMAL
                            | app::model::ThrottleReasons::HW_SLOWDOWN
                    } else {
                        app::model::ThrottleReasons::SW_POWER_CAP
                    })),
                    ..Default::default()
                })
                .collect(),
            ..Readings::default()
        };
        let mut reasons = ReasonCounter::default();
        assert!(hr
            .add(
                &ov(0, 1000.0, 0),
                &reasons.count(&ov(0, 0.0, 0), &readings(0)),
                third
            )
            .is_empty());
        assert!(hr
            .add(
                &ov(third, 2000.0, 2),
                &reasons.count(&ov(0, 0.0, 0), &readings(2)),
                third
            )
            .is_empty());
        assert!(hr
            .add(
                &ov(2 * third, 3000.0, 4),
                &reasons.count(&ov(0, 0.0, 0), &readings(4)),
                third
            )
            .is_empty());
        let done = hr.add(
            &ov(h, 500.0, 0),
            &reasons.count(&ov(0, 0.0, 0), &readings(0)),
            third,
        );
        let c = done
            .iter()
            .find(|r| r.scope == "cluster")
            .expect("cluster hour");
        assert_eq!(c.at_ms, 0);
        assert_eq!((c.power_watts_min, c.power_watts_max), (1000.0, 3000.0));
        assert!((c.power_watts_mean - 2000.0).abs() < 1e-9);
        assert!((c.energy_wh - 2000.0).abs() < 1e-6, "{}", c.energy_wh);
        assert_eq!(c.gpus_throttling_max, 4);
        assert!((c.throttled_gpu_seconds - 6.0 * 1200.0).abs() < 1e-6);
        // Per reason (HW thermal, SW thermal, SW power cap, HW slowdown, HW power brake):
        // one GPU for HW thermal and slowdown in two ticks; 1 then 3 for the power cap.
        assert_eq!(
            c.throttled_s_by_reason,
            [2400.0, 0.0, 4.0 * 1200.0, 2400.0, 0.0]
        );
        assert_eq!(c.samples, 3);
        assert_eq!(c.sm_active_mean, None);
    }
}
