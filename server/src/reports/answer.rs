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
    })
}

/// The report `q` asks for, as of `now_ms`, with its charts as SVG.
pub async fn build(
    store: &Store,
    q: &ReportQuery,
    now_ms: UnixMs,
    rates: &Rates,
) -> Result<Report, ReportError> {
    let began = std::time::Instant::now();
    let d = data(store, q, now_ms, rates).await?;
    let charts = crate::charts::report_charts(&d.plot(q, rates)).map_err(ReportError::Chart)?;
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
    })
}
