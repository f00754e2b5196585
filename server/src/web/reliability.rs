//! Reliability (`crate::reliability`): the answer as JSON, and each of its tables as CSV.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;

use super::error::ApiError;
use super::extract::Path;
use super::extract::Query;
use super::{AppState, Routes};
use crate::charts::LedgerChartKind;
use crate::live::Live;
use crate::reliability::{History, ReliabilityError};
use crate::store::Store;
use app::reliability::LedgerRow;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/reliability", get(reliability_get)),
        ("/api/reliability/charts/{file}", get(reliability_chart)),
    ]
}

fn query_error(e: ReliabilityError) -> ApiError {
    match e {
        ReliabilityError::Query(m) => ApiError::BadRequest(m),
        ReliabilityError::Store(e) => ApiError::Storage(e),
    }
}

/// The answer for `q` now, with the history it read.
pub(super) async fn answer(
    live: &Live,
    store: &Store,
    q: &app::reports::ReportQuery,
) -> Result<(app::reliability::Reliability, History, Vec<LedgerRow>), ApiError> {
    let inv = live.inventory().ok_or(ApiError::NotReady)?;
    let (mut r, h, jobs) = crate::reliability::build(store, &inv, q, live.source_now())
        .await
        .map_err(query_error)?;
    r.radar = store
        .open_alerts()
        .await
        .map_err(ApiError::Storage)?
        .into_iter()
        .filter(|a| matches!(a.rule.as_str(), "straggler" | "job_hung"))
        .collect();
    // What of the period the rollups hold, as on /reports.
    let (total, first) = store
        .report_total("cluster", "all", r.from_ms, r.to_ms)
        .await
        .map_err(ApiError::Storage)?;
    r.coverage = app::reports::Coverage::of(
        r.to_ms.min(r.now_ms) - r.from_ms,
        total.capacity_gs / 3600.0,
        inv.gpu_count(),
        first,
    );
    Ok((r, h, jobs))
}

/// The tables `format=csv` can give.
pub(super) const TABLES: [&str; 11] = [
    "causes",
    "groups",
    "models",
    "nodes",
    "sizes",
    "repairs",
    "lemons",
    "interruptions",
    "ledger",
    "ledger_accounts",
    "ledger_jobs",
];

/// `GET /api/reliability?period=&group=&at=&from=&to=[&format=csv&table=]`: the answer as
/// JSON, or one table as CSV (`table`: causes, groups, models, nodes, sizes, repairs,
/// lemons, interruptions, ledger, ledger_accounts, ledger_jobs; interruptions and
/// ledger_jobs have every one of the period).
/// Interruptions and their causes, lemon nodes, the badput ledger and ETTR for a period
/// (`format=csv&table=...`: one of its tables as a download).
#[utoipa::path(get, path = "/api/reliability", tag = "reliability",
    params(super::reports::ReportParams,
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`"),
        ("table" = Option<String>, Query, description = "with format=csv: causes, groups, models, nodes, sizes, repairs, lemons, interruptions (default), ledger, ledger_accounts or ledger_jobs")),
    responses((status = 200, description = "reliability, or a CSV table",
        content((app::reliability::Reliability = "application/json"), (String = "text/csv")))))]
async fn reliability_get(
    State(st): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let (q, format) = super::reports::report_query(&pairs)?;
    // A table is read whichever format is asked for: a wrong one is a wrong question.
    for (_, t) in pairs.iter().filter(|(k, _)| k == "table") {
        if !TABLES.contains(&t.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "unknown table {:?}: {}",
                t.chars().take(40).collect::<String>(),
                TABLES.join(", ")
            )));
        }
    }
    let (r, h, jobs) = answer(&st.live, &st.store, &q).await?;
    match format.as_deref() {
        None | Some("json") => Ok(Json(r).into_response()),
        Some("csv") => {
            let table = pairs
                .iter()
                .find(|(k, _)| k == "table")
                .map_or("interruptions", |(_, v)| v.as_str());
            let all = match table {
                "interruptions" => {
                    let inv = st.live.inventory().ok_or(ApiError::NotReady)?;
                    crate::reliability::with_window(&h, &inv, r.from_ms, r.to_ms).0
                }
                _ => Vec::new(),
            };
            let body = crate::reliability::csv(&r, &all, &jobs, table).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "unknown table {table:?}: causes, groups, models, nodes, sizes, repairs, lemons, interruptions, ledger, ledger_accounts or ledger_jobs"
                ))
            })?;
            let name = format!(
                "gantry-reliability-{table}-{}-{}.csv",
                app::units::date(r.from_ms),
                app::units::date(r.to_ms - 1)
            );
            Ok(super::download(super::CSV, &name, body))
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown format {other:?}: json or csv"
        ))),
    }
}

/// `GET /api/reliability/charts/{ettr|ledger}.{svg|png}?period=...`: ETTR over time, or
/// the ledger's buckets stacked over time, for the same query words as the page.
/// The ETTR or the ledger chart (`ettr` or `ledger`, `.svg` or `.png`).
#[utoipa::path(get, path = "/api/reliability/charts/{file}", tag = "charts",
    params(("file" = String, Path, description = "ettr.svg, ettr.png, ledger.svg or ledger.png"), super::reports::ReportParams),
    responses((status = 200, description = "the chart",
        content((String = "image/svg+xml"), (Vec<u8> = "image/png")))))]
async fn reliability_chart(
    State(st): State<AppState>,
    Path(file): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let (name, ext) = file.rsplit_once('.').ok_or(ApiError::NotFound)?;
    let kind = LedgerChartKind::parse(name).ok_or(ApiError::NotFound)?;
    let (q, _) = super::reports::report_query(&pairs)?;
    // The ledger's rollups only: a chart attributes no interruption.
    let window = crate::reliability::window(&q, st.live.source_now()).map_err(query_error)?;
    let (ledger, _) = crate::reliability::ledger::load(&st.store, window.0, window.1)
        .await
        .map_err(ApiError::Storage)?;
    let file_name = format!(
        "gantry-{}-{}-{}.{ext}",
        kind.name(),
        app::units::date(window.0),
        app::units::date(window.1 - 1)
    );
    match ext {
        "svg" => {
            let svg =
                crate::charts::ledger_svg(kind, &ledger, window).map_err(ApiError::Internal)?;
            Ok(super::download(
                "image/svg+xml",
                &file_name,
                svg.into_bytes(),
            ))
        }
        "png" => {
            let png =
                crate::charts::ledger_png(kind, &ledger, window).map_err(ApiError::Internal)?;
            Ok(super::download("image/png", &file_name, png))
        }
        _ => Err(ApiError::NotFound),
    }
}
