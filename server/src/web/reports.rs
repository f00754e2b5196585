//! Reports (`crate::reports`): JSON with its charts, CSV, and one chart as a download.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;

use super::error::ApiError;
use super::extract::{Path, Query};
use super::{AppState, Routes};

pub(super) fn routes() -> Routes {
    vec![
        ("/api/reports", get(report_get)),
        ("/api/reports/charts/{file}", get(report_chart)),
    ]
}

/// The words of a report's query, as `report_query` reads them (for the API's description;
/// the handlers read the pairs themselves, to tell each bad word apart).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
// Never built: only its description is used.
#[allow(dead_code)]
pub(super) struct ReportParams {
    /// `day`, `week`, `month` (default) or `custom`.
    period: Option<String>,
    /// `account` (default), `partition`, `user`, `rack` or `domain`.
    group: Option<String>,
    /// A date in the period (YYYY-MM-DD), default today.
    at: Option<String>,
    /// A custom period's first day (YYYY-MM-DD).
    from: Option<String>,
    /// A custom period's last day (YYYY-MM-DD).
    to: Option<String>,
}

/// The report query of a request's URL (`period`, `group`, `at`, `from`, `to`), and its
/// `format`.
pub(super) fn report_query(
    pairs: &[(String, String)],
) -> Result<(app::reports::ReportQuery, Option<String>), ApiError> {
    let format = pairs
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.clone());
    let q =
        app::reports::ReportQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(ApiError::BadRequest)?;
    Ok((q, format))
}

/// The cluster's GPUs as the source last listed them (0: not yet), for a report's coverage.
pub(super) fn gpus_of(live: &crate::live::Live) -> usize {
    live.inventory().map(|i| i.gpu_count()).unwrap_or(0)
}

/// `GET /api/reports?period=&group=&at=&from=&to=[&format=csv]`: the report as JSON (with
/// its charts as SVG) or as CSV (one line per group, then unallocated and total).
/// Utilization and cost for a period, per account, partition or user (`format=csv`: a
/// download).
#[utoipa::path(get, path = "/api/reports", tag = "reports",
    params(super::reports::ReportParams,
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`")),
    responses((status = 200, description = "the report, or CSV with format=csv",
        content((app::reports::Report = "application/json"), (String = "text/csv")))))]
async fn report_get(
    State(st): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let (q, format) = report_query(&pairs)?;
    let now = st.live.source_now();
    match format.as_deref() {
        None | Some("json") => {
            let r = crate::reports::build(&st.store, &q, now, &st.rates, gpus_of(&st.live)).await?;
            Ok(Json(r).into_response())
        }
        Some("csv") => {
            // The numbers only: no chart is drawn for a CSV.
            let r = crate::reports::data(&st.store, &q, now, &st.rates).await?;
            let name = format!(
                "gantry-report-{}-{}-{}.csv",
                q.group.as_str(),
                app::units::date(r.from_ms),
                app::units::date(r.to_ms - 1)
            );
            Ok(super::download(
                super::CSV,
                &name,
                crate::reports::csv(&r, &st.rates.currency),
            ))
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown format {other:?}: json or csv"
        ))),
    }
}

/// `GET /api/reports/charts/{utilization|goodput|cost}.{svg|png}?period=...`: one chart
/// of a report, as a download.
/// One of the report's charts as a download (`utilization`, `cost`, ... `.svg` or `.png`).
#[utoipa::path(get, path = "/api/reports/charts/{file}", tag = "charts",
    params(("file" = String, Path, description = "CHART.svg or CHART.png"), super::reports::ReportParams),
    responses((status = 200, description = "the chart",
        content((String = "image/svg+xml"), (Vec<u8> = "image/png")))))]
async fn report_chart(
    State(st): State<AppState>,
    Path(file): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let (name, ext) = file.rsplit_once('.').ok_or(ApiError::NotFound)?;
    let kind = crate::charts::ReportChartKind::parse(name).ok_or(ApiError::NotFound)?;
    if ext != "svg" && ext != "png" {
        return Err(ApiError::NotFound);
    }
    let (q, _) = report_query(&pairs)?;
    let d = crate::reports::data(&st.store, &q, st.live.source_now(), &st.rates).await?;
    let plot = d.plot(&q, &st.rates);
    let disposition = format!(
        "attachment; filename=\"gantry-{name}-{}-{}.{ext}\"",
        app::units::date(d.from_ms),
        app::units::date(d.to_ms - 1)
    );
    let (body, mime) = if ext == "svg" {
        let svg = crate::charts::report_svg(kind, &plot).map_err(ApiError::Internal)?;
        (svg.into_bytes(), "image/svg+xml")
    } else {
        let png = crate::charts::report_png(kind, &plot).map_err(ApiError::Internal)?;
        (png, "image/png")
    };
    Ok((
        [
            (header::CONTENT_TYPE, mime.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        body,
    )
        .into_response())
}
