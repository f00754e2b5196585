//! Manager reports: what `/reports` asks for and what it shows (server and browser).
//!
//! A report covers a period (a day, a week, a calendar month or custom dates, all UTC) and
//! groups GPU-hours, energy, goodput and cost by account, partition, user, rack or switch
//! domain. The server computes it from hourly report rollups; nothing here does I/O.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;
use crate::units;

/// What a report's rows are.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    #[default]
    Account,
    Partition,
    User,
    Rack,
    /// Data halls (where the layout names them): their racks' sums.
    Hall,
    /// Every switch domain: NVLink domains, leaf and spine switches, Slurm blocks. A node
    /// belongs to several, so these rows overlap and do not sum to the total.
    Domain,
}

impl GroupBy {
    pub const ALL: [GroupBy; 6] = [
        GroupBy::Account,
        GroupBy::Partition,
        GroupBy::User,
        GroupBy::Rack,
        GroupBy::Hall,
        GroupBy::Domain,
    ];

    /// The name in URLs, CSV files and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Account => "account",
            GroupBy::Partition => "partition",
            GroupBy::User => "user",
            GroupBy::Rack => "rack",
            GroupBy::Hall => "hall",
            GroupBy::Domain => "domain",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            GroupBy::Account => "Account",
            GroupBy::Partition => "Partition",
            GroupBy::User => "User",
            GroupBy::Rack => "Rack",
            GroupBy::Hall => "Hall",
            GroupBy::Domain => "Switch domain",
        }
    }

    pub fn parse(s: &str) -> Option<GroupBy> {
        GroupBy::ALL.into_iter().find(|g| g.as_str() == s)
    }

    /// Groups of jobs (account, partition, user): their rows plus the unallocated row sum
    /// to the cluster's total.
    pub fn is_jobs(self) -> bool {
        matches!(self, GroupBy::Account | GroupBy::Partition | GroupBy::User)
    }
}

/// The row of GPU-hours no job held (free, drained, down), in job groupings.
pub const UNALLOCATED: &str = "(unallocated)";

/// How long a report runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Period {
    #[default]
    Day,
    /// The seven days that end with the chosen day.
    Week,
    /// The calendar month of the chosen day.
    Month,
    /// From one date to another, both included.
    Custom,
}

impl Period {
    pub const ALL: [Period; 4] = [Period::Day, Period::Week, Period::Month, Period::Custom];

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Custom => "custom",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Period::Day => "Day",
            Period::Week => "Week",
            Period::Month => "Month",
            Period::Custom => "Custom",
        }
    }

    pub fn parse(s: &str) -> Option<Period> {
        Period::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// The longest custom period: the one-hour rollups are kept 400 days by default.
pub const MAX_DAYS: i64 = 400;

const DAY_MS: i64 = 86_400_000;

/// A report's question, as in its URL: `?period=week&at=2026-11-29&group=rack`, or
/// `?period=custom&from=2026-11-01&to=2026-11-15`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ReportQuery {
    pub period: Period,
    pub group: GroupBy,
    /// The day the period is of (day, week, month); today when absent.
    pub at: Option<String>,
    /// Custom period: first and last day, both included.
    pub from: Option<String>,
    pub to: Option<String>,
}

impl ReportQuery {
    /// From URL query pairs; unknown values are errors in words, never silently replaced.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut q = ReportQuery::default();
        for (k, v) in pairs {
            let v = v.trim();
            match k {
                "period" if !v.is_empty() => {
                    q.period = Period::parse(v).ok_or_else(|| {
                        format!("unknown period {v:?}: day, week, month or custom")
                    })?
                }
                "group" if !v.is_empty() => {
                    q.group = GroupBy::parse(v).ok_or_else(|| {
                        format!("unknown grouping {v:?}: account, partition, user, rack or domain")
                    })?
                }
                "at" if !v.is_empty() => q.at = Some(v.to_string()),
                "from" if !v.is_empty() => q.from = Some(v.to_string()),
                "to" if !v.is_empty() => q.to = Some(v.to_string()),
                _ => {}
            }
        }
        Ok(q)
    }

    /// The URL query of this report (for links, downloads and charts).
    pub fn to_query(&self) -> String {
        let mut s = format!(
            "period={}&group={}",
            self.period.as_str(),
            self.group.as_str()
        );
        for (k, v) in [("at", &self.at), ("from", &self.from), ("to", &self.to)] {
            if let Some(v) = v {
                // Dates only ever hold digits and dashes once `window` accepted them.
                let clean: String = v
                    .chars()
                    .filter(|c| c.is_ascii_digit() || *c == '-')
                    .collect();
                s.push_str(&format!("&{k}={clean}"));
            }
        }
        s
    }

    /// The period as `[from_ms, to_ms)`, whole UTC days; or why not, in words.
    pub fn window(&self, now_ms: UnixMs) -> Result<(UnixMs, UnixMs), String> {
        let day = |s: &Option<String>, what: &str| -> Result<UnixMs, String> {
            match s {
                None => Ok(now_ms - now_ms.rem_euclid(DAY_MS)),
                Some(s) => units::parse_date(s)
                    .ok_or_else(|| format!("{what} {s:?} is not a date like 2026-11-29")),
            }
        };
        // Every date given is read, whichever period uses it.
        day(&self.at, "day")?;
        day(&self.from, "first day")?;
        day(&self.to, "last day")?;
        match self.period {
            Period::Day => {
                let d = day(&self.at, "day")?;
                Ok((d, d + DAY_MS))
            }
            Period::Week => {
                let d = day(&self.at, "day")?;
                Ok((d - 6 * DAY_MS, d + DAY_MS))
            }
            Period::Month => Ok(units::month_bounds(day(&self.at, "day")?)),
            Period::Custom => {
                // The last day defaults to today, the first to the last.
                let to = day(&self.to, "last day")? + DAY_MS;
                let from = match self.from {
                    Some(_) => day(&self.from, "first day")?,
                    None => to - DAY_MS,
                };
                if to <= from {
                    return Err("the last day comes before the first".into());
                }
                if to - from > MAX_DAYS * DAY_MS {
                    return Err(format!("a custom period is at most {MAX_DAYS} days"));
                }
                Ok((from, to))
            }
        }
    }
}

/// Where GPU-hours went, and energy. All in GPU-hours except `energy_kwh`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Usage {
    /// What the group had: every GPU's hours for racks and domains; hours held for jobs.
    pub capacity_gh: f64,
    pub allocated_gh: f64,
    /// Allocated and doing work (SM activity at or over the idle threshold).
    pub busy_gh: f64,
    /// Allocated and idle.
    pub idle_gh: f64,
    /// Not allocated and available.
    pub free_gh: f64,
    pub drained_gh: f64,
    pub down_gh: f64,
    /// Busy hours lost to throttling (clock deficit times time).
    pub throttle_lost_gh: f64,
    /// Hours since the last checkpoint thrown away by failures and requeues.
    pub failure_lost_gh: f64,
    /// Useful training: allocated minus idle, throttling and failure losses.
    pub goodput_gh: f64,
    /// Nodes' energy (BMC; else their GPUs').
    pub energy_kwh: f64,
    /// The GPUs' own (DCGM's energy counters), and of it what was estimated from their
    /// power where a counter was missing or reset. The rest of `energy_kwh` is the nodes'
    /// overhead (CPUs, memory, fans, NICs), shared with jobs by their GPU-hours.
    #[serde(default)]
    pub gpu_energy_kwh: f64,
    #[serde(default)]
    pub energy_estimated_kwh: f64,
    /// Allocated GPU-hours held idle past `alerts.idle_gpu_minutes` (SM activity under the
    /// threshold and no memory in use): what notices to owners can win back.
    #[serde(default)]
    pub held_idle_gh: f64,
}

/// What the hours cost, in the configured currency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Cost {
    /// GPU purchase amortized over the configured years, for the capacity's hours.
    pub capex: f64,
    /// Energy times price times PUE.
    pub power: f64,
    /// Fixed overhead per rack, shared by the rack's GPUs.
    pub overhead: f64,
    pub total: f64,
    /// What idle allocated hours, throttling and failures cost (at the group's rate).
    pub idle: f64,
    pub throttle: f64,
    pub failures: f64,
    /// Total cost per GPU-hour of goodput; `None` without goodput.
    pub per_goodput_gh: Option<f64>,
    /// What the same allocated GPU-hours would cost rented in a cloud.
    pub cloud_same_hours: f64,
    /// CO2 of the energy with cooling (times PUE) at `reports.grid_kg_co2_per_kwh`; none
    /// when no grid factor is configured.
    #[serde(default)]
    pub co2_kg: Option<f64>,
}

/// One job's energy over its runs, as its report rows hold it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct JobEnergy {
    /// Its nodes' energy shared by its GPU-hours (BMC, else its GPUs').
    pub kwh: f64,
    /// Its GPUs' own (energy counters), and of it what was estimated from power.
    pub gpu_kwh: f64,
    pub estimated_kwh: f64,
    /// Energy times price times PUE, in `currency`.
    pub cost: f64,
    pub currency: String,
    /// With cooling (times PUE) at the configured grid factor; none without one.
    pub co2_kg: Option<f64>,
}

/// One group's line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ReportRow {
    pub key: String,
    pub usage: Usage,
    pub cost: Cost,
}

/// The rates costs are computed with (from the server's `[reports]` config), shown on the page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Rates {
    pub currency: String,
    /// Purchase price of one GPU (with its share of the server), in `currency`.
    pub gpu_capex: f64,
    pub amortization_years: f64,
    pub power_price_per_kwh: f64,
    /// Power usage effectiveness: facility power over IT power.
    pub pue: f64,
    pub rack_overhead_per_month: f64,
    /// A cloud's price of one comparable GPU for one hour.
    pub cloud_gpu_hour: f64,
    /// Allocated GPUs under this SM activity count as idle.
    pub idle_below_sm: f64,
    /// The grid's CO2 per kWh (kg); 0: not configured, no CO2 shown.
    #[serde(default)]
    pub grid_kg_co2_per_kwh: f64,
}

impl Default for Rates {
    fn default() -> Self {
        // An H100 SXM costs about $30K; renting a 400-GPU equivalent costs $4.5-6M a year,
        // about $1.50 per GPU-hour.
        Rates {
            currency: "USD".into(),
            gpu_capex: 30_000.0,
            amortization_years: 4.0,
            power_price_per_kwh: 0.12,
            pue: 1.3,
            rack_overhead_per_month: 1_500.0,
            cloud_gpu_hour: 1.50,
            idle_below_sm: 0.05,
            grid_kg_co2_per_kwh: 0.0,
        }
    }
}

/// One chart of a report, drawn on the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ReportChart {
    /// Its name in download URLs: `utilization`, `goodput`, `cost`.
    pub name: String,
    pub title: String,
    pub svg: String,
}

/// A computed report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Report {
    pub query: ReportQuery,
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
    /// The source's time now: a period that ends later is shown as "so far".
    pub now_ms: UnixMs,
    pub rates: Rates,
    /// Largest cost first.
    pub rows: Vec<ReportRow>,
    /// Job groupings only: the hours no job held.
    pub unallocated: Option<ReportRow>,
    /// The whole cluster.
    pub total: ReportRow,
    pub charts: Vec<ReportChart>,
    /// Server time to compute it, in ms.
    pub server_ms: f64,
    /// What of the period has data.
    #[serde(default)]
    pub coverage: Coverage,
    /// The whole cluster over the period of the same length just before, to compare.
    #[serde(default)]
    pub previous: Option<ReportRow>,
}

/// What of a report's period the rollups hold: Gantry books what it watched, so a period
/// that began before it did (or while it was stopped) is covered in part.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Coverage {
    /// The period's time so far: to its end, or to now.
    pub elapsed_ms: i64,
    /// The part with data: the cluster's booked GPU-hours over its GPUs; `None` when the
    /// cluster's size is not known yet.
    pub covered_ms: Option<i64>,
    /// The first hour with data in the period.
    pub first_ms: Option<UnixMs>,
}

impl Coverage {
    /// The coverage of a period of `elapsed_ms` with `capacity_gh` booked for a cluster of
    /// `gpus` GPUs, first booked in the hour `first_ms`.
    pub fn of(elapsed_ms: i64, capacity_gh: f64, gpus: usize, first_ms: Option<UnixMs>) -> Self {
        Coverage {
            elapsed_ms: elapsed_ms.max(0),
            covered_ms: (gpus > 0).then(|| {
                ((capacity_gh / gpus as f64 * 3_600_000.0).round() as i64)
                    .clamp(0, elapsed_ms.max(0))
            }),
            first_ms,
        }
    }

    /// The share of the period with data, when known.
    pub fn share(&self) -> Option<f64> {
        let c = self.covered_ms?;
        (self.elapsed_ms > 0).then(|| c as f64 / self.elapsed_ms as f64)
    }

    /// In words: "Data for 1 h 5 min of the period's 8 h 23 min so far (13%), from the hour
    /// of 07:00 UTC: Gantry books what it watches." Whole when 99% or more.
    pub fn words(&self, so_far: bool) -> String {
        let period = if so_far {
            "the period's time so far"
        } else {
            "the period"
        };
        match (self.covered_ms, self.share()) {
            _ if self.first_ms.is_none() => format!("No data for {period} yet."),
            (_, Some(s)) if s >= 0.99 => format!("Data for all of {period}."),
            (Some(c), Some(s)) => format!(
                "Data for {} of {} ({}){}: Gantry books only what it watched.",
                crate::units::duration_ms(c),
                if so_far {
                    format!("the {} so far", crate::units::duration_ms(self.elapsed_ms))
                } else {
                    format!("the period's {}", crate::units::duration_ms(self.elapsed_ms))
                },
                crate::units::percent(Some(s)),
                self.first_ms
                    .map(|t| format!(", from the hour of {}", crate::units::utc_minute(t)))
                    .unwrap_or_default()
            ),
            _ => "How much of the period has data is not known yet (the cluster's size is not known).".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMs = 1_795_968_312_000; // 2026-11-29 16:05:12 UTC

    fn q(pairs: &[(&str, &str)]) -> Result<(String, String), String> {
        let q = ReportQuery::from_pairs(pairs.iter().copied())?;
        let (a, b) = q.window(NOW)?;
        Ok((units::date(a), units::date(b - 1)))
    }

    #[test]
    fn coverage_says_how_much_of_the_period_has_data() {
        // 64 GPUs, 8 h 23 min so far, 65 min booked since 07:00.
        let c = Coverage::of(503 * 60_000, 64.0 * 65.0 / 60.0, 64, Some(NOW - 3_600_000));
        assert_eq!(c.covered_ms, Some(65 * 60_000));
        assert_eq!(
            c.words(true),
            "Data for 1 h 5 min of the 8 h 23 min so far (13%), from the hour of 2026-11-29 15:05 UTC: Gantry books only what it watched."
        );
        let whole = Coverage::of(3_600_000, 64.0, 64, Some(NOW));
        assert_eq!(whole.words(false), "Data for all of the period.");
        assert_eq!(
            Coverage::of(3_600_000, 0.0, 64, None).words(false),
            "No data for the period yet."
        );
        // Never more than the period, whatever the rollups hold.
        assert_eq!(
            Coverage::of(60_000, 640.0, 64, Some(NOW)).covered_ms,
            Some(60_000)
        );
        assert_eq!(Coverage::of(60_000, 1.0, 0, Some(NOW)).covered_ms, None);
    }

    #[test]
    fn periods_are_whole_utc_days() {
        let d = |a: &str, b: &str| Ok((a.to_string(), b.to_string()));
        assert_eq!(q(&[]), d("2026-11-29", "2026-11-29"));
        assert_eq!(q(&[("period", "week")]), d("2026-11-23", "2026-11-29"));
        assert_eq!(
            q(&[("period", "month"), ("at", "2026-02-10")]),
            d("2026-02-01", "2026-02-28")
        );
        assert_eq!(
            q(&[
                ("period", "custom"),
                ("from", "2026-01-01"),
                ("to", "2026-03-31")
            ]),
            d("2026-01-01", "2026-03-31")
        );
        assert!(q(&[
            ("period", "custom"),
            ("from", "2026-03-01"),
            ("to", "2026-01-01")
        ])
        .is_err());
        assert!(q(&[
            ("period", "custom"),
            ("from", "2025-01-01"),
            ("to", "2026-03-01")
        ])
        .is_err());
        assert!(q(&[("period", "day"), ("at", "2026-02-30")]).is_err());
        assert!(q(&[("period", "year")]).is_err());
        assert!(q(&[("group", "planet")]).is_err());
    }

    #[test]
    fn the_query_round_trips_through_its_url() {
        let q =
            ReportQuery::from_pairs([("period", "week"), ("group", "rack"), ("at", "2026-11-20")])
                .expect("q");
        assert_eq!(q.to_query(), "period=week&group=rack&at=2026-11-20");
        let back =
            ReportQuery::from_pairs(q.to_query().split('&').filter_map(|kv| kv.split_once('=')))
                .expect("back");
        assert_eq!(back, q);
        // Whatever was typed, only digits and dashes reach a URL.
        let odd = ReportQuery {
            at: Some("2026-11-20\"><script>".into()),
            ..ReportQuery::default()
        };
        assert!(!odd.to_query().contains('<') && !odd.to_query().contains('"'));
    }
}
