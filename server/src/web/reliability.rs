//! Reliability (`crate::reliability`): the answer as JSON, and each of its tables as CSV.

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;

use super::error::ApiError;
use super::{AppState, Routes};
use crate::live::Live;
use crate::reliability::{History, ReliabilityError};
use crate::store::Store;

pub(super) fn routes() -> Routes {
    vec![("/api/reliability", get(reliability_get))]
}

/// The answer for `q` now, with the history it read.
pub(super) async fn answer(
    live: &Live,
    store: &Store,
    q: &app::reports::ReportQuery,
) -> Result<(app::reliability::Reliability, History), ApiError> {
    let inv = live.inventory().ok_or(ApiError::NotReady)?;
    let (mut r, h) = crate::reliability::build(store, &inv, q, live.source_now())
        .await
        .map_err(|e| match e {
            ReliabilityError::Query(m) => ApiError::BadRequest(m),
            ReliabilityError::Store(e) => ApiError::Storage(e),
        })?;
    r.radar = store
        .open_alerts()
        .await
        .map_err(ApiError::Storage)?
        .into_iter()
        .filter(|a| matches!(a.rule.as_str(), "straggler" | "job_hung"))
        .collect();
    Ok((r, h))
}

/// `GET /api/reliability?period=&group=&at=&from=&to=[&format=csv&table=]`: the answer as
/// JSON, or one table as CSV (`table`: causes, groups, models, nodes, sizes, repairs,
/// lemons, interruptions; the last has every interruption of the period).
async fn reliability_get(
    State(st): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let q =
        app::reports::ReportQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(ApiError::BadRequest)?;
    let (r, h) = answer(&st.live, &st.store, &q).await?;
    match get("format") {
        None | Some("json") => Ok(Json(r).into_response()),
        Some("csv") => {
            let table = get("table").unwrap_or("interruptions");
            let all = match table {
                "interruptions" => {
                    let inv = st.live.inventory().ok_or(ApiError::NotFound)?;
                    crate::reliability::with_window(&h, &inv, r.from_ms, r.to_ms).0
                }
                _ => Vec::new(),
            };
            let body = crate::reliability::csv(&r, &all, table).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "unknown table {table:?}: causes, groups, models, nodes, sizes, repairs, lemons or interruptions"
                ))
            })?;
            let name = format!(
                "gantry-reliability-{table}-{}-{}.csv",
                app::units::date(r.from_ms),
                app::units::date(r.to_ms - 1)
            );
            Ok((
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}\""),
                    ),
                ],
                body,
            )
                .into_response())
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown format {other:?}: json or csv"
        ))),
    }
}
