//! A report's answer: its numbers from the hourly rollups alone (three grouped sums over
//! the period's hours, whatever the period), and the report with its charts.

use app::model::UnixMs;
use app::reports::{Rates, Report, ReportQuery, ReportRow, Usage, UNALLOCATED};

use super::rates::{bucket_hours, cost, usage};
use super::HOUR_MS;
use crate::store::{ReportSums, Store, StoreError};

/// Why a report cannot be answered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The question is wrong; the words are for the user.
    #[error("{0}")]
    Query(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("chart: {0}")]
    Chart(String),
}

fn row(key: String, s: &ReportSums, rates: &Rates) -> ReportRow {
    let usage = usage(s);
    ReportRow {
        cost: cost(&usage, s.rack_share_s, rates),
        key,
        usage,
    }
}

/// A report's numbers, before any chart.
pub struct ReportData {
    pub from_ms: UnixMs,
    pub to_ms: UnixMs,
    pub bucket_hours: i64,
    /// Cluster usage per bucket.
    pub points: Vec<(UnixMs, Usage)>,
    /// Largest cost first.
    pub rows: Vec<ReportRow>,
    pub unallocated: Option<ReportRow>,
    pub total: ReportRow,
    /// The source's time the report was asked at.
    pub now_ms: UnixMs,
}

impl ReportData {
    pub fn plot<'a>(&'a self, q: &ReportQuery, rates: &'a Rates) -> crate::charts::ReportPlot<'a> {
        crate::charts::ReportPlot {
            group: q.group,
            currency: &rates.currency,
            bucket_hours: self.bucket_hours,
            window: (self.from_ms, self.to_ms),
            points: &self.points,
            rows: &self.rows,
            now_ms: self.now_ms,
        }
    }
}

/// The numbers of the report `q` asks for, as of `now_ms`, from the hourly rollups: three
/// grouped sums over the period's hours, whatever the period.
pub async fn data(
    store: &Store,
    q: &ReportQuery,
    now_ms: UnixMs,
    rates: &Rates,
) -> Result<ReportData, ReportError> {
    let (from_ms, to_ms) = q.window(now_ms).map_err(ReportError::Query)?;
    let bucket_hours = bucket_hours(from_ms, to_ms);
    let (groups, total, series) = tokio::try_join!(
        store.report_groups(q.group.as_str(), from_ms, to_ms),
        store.report_groups("cluster", from_ms, to_ms),
        store.report_series("cluster", "all", from_ms, to_ms, bucket_hours * HOUR_MS),
    )?;
    let total = total
        .into_iter()
        .find(|(k, _)| k == "all")
        .map(|(_, s)| s)
        .unwrap_or_default();
    let mut unallocated = None;
    let mut rows = Vec::with_capacity(groups.len());
    for (key, s) in groups {
        let r = row(key, &s, rates);
        if q.group.is_jobs() && r.key == UNALLOCATED {
            unallocated = Some(r);
        } else {
            rows.push(r);
        }
    }
    rows.sort_by(|a, b| {
        b.cost
            .total
            .total_cmp(&a.cost.total)
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(ReportData {
        from_ms,
        to_ms,
        bucket_hours,
        points: series.iter().map(|(t, s)| (*t, usage(s))).collect(),
        rows,
        unallocated,
        total: row("cluster".into(), &total, rates),
        now_ms,
    })
}

/// The report `q` asks for, as of `now_ms`, with its charts as SVG, what of its period
/// has data (for a cluster of `gpus` GPUs; 0: not known yet), and the cluster over the
/// same stretch of the period before.
pub async fn build(
    store: &Store,
    q: &ReportQuery,
    now_ms: UnixMs,
    rates: &Rates,
    gpus: usize,
) -> Result<Report, ReportError> {
    let began = std::time::Instant::now();
    let d = data(store, q, now_ms, rates).await?;
    let charts = crate::charts::report_charts(&d.plot(q, rates)).map_err(ReportError::Chart)?;
    let elapsed = d.to_ms.min(now_ms) - d.from_ms;
    let len = d.to_ms - d.from_ms;
    // The period before, as far into it as this one is (today so far against yesterday's
    // same hours), so the two compare like with like.
    let (prev_from, prev_to) = (d.from_ms - len, d.from_ms - len + elapsed.max(0));
    let (first, previous) = tokio::try_join!(
        store.report_first_at("cluster", "all", d.from_ms),
        store.report_groups("cluster", prev_from, prev_to),
    )?;
    let first = first.filter(|&t| t < d.to_ms);
    let previous = previous
        .into_iter()
        .find(|(k, _)| k == "all")
        .map(|(_, s)| {
            row(
                format!(
                    "{} to {}",
                    app::units::utc_minute(prev_from),
                    app::units::utc_minute(prev_to)
                ),
                &s,
                rates,
            )
        });
    let coverage = app::reports::Coverage::of(elapsed, d.total.usage.capacity_gh, gpus, first);
    Ok(Report {
        query: q.clone(),
        from_ms: d.from_ms,
        to_ms: d.to_ms,
        now_ms,
        rates: rates.clone(),
        rows: d.rows,
        unallocated: d.unallocated,
        total: d.total,
        charts,
        server_ms: began.elapsed().as_secs_f64() * 1000.0,
        coverage,
        previous,
    })
}
