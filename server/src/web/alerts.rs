//! Alerts as the store keeps them: the list, acknowledgement, silencing.

use app::model::UnixMs;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::JsonBody;
use super::{AppState, Routes};
use crate::auth::Caller;
use crate::live::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/alerts", get(alerts_list)),
        ("/api/alerts/{id}/ack", post(alert_ack)),
        ("/api/alerts/{id}/silence", post(alert_silence)),
    ]
}

/// An acknowledgement's note, from the API or a page: at most 1000 bytes, no control
/// characters.
pub(super) fn check_note(note: &str) -> Result<(), &'static str> {
    if note.len() > 1000 || note.chars().any(char::is_control) {
        return Err("note: at most 1000 characters, no control characters");
    }
    Ok(())
}

/// When a silence of `minutes` from `now_ms` ends: from a minute to a week.
pub(super) fn silence_until(minutes: u32, now_ms: UnixMs) -> Result<UnixMs, &'static str> {
    if !(1..=7 * 24 * 60).contains(&minutes) {
        return Err("minutes: 1 to 10080");
    }
    Ok(now_ms + i64::from(minutes) * 60_000)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct AlertsQuery {
    limit: Option<u32>,
}

/// `GET /api/alerts`: firing alerts first, then recent history.
/// `GET /api/alerts`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct AlertsAnswer {
    /// Alerts firing and not silenced.
    firing: u32,
    alerts: Vec<app::views::AlertItem>,
}

/// Firing alerts first, then recent ones (`limit`, default 200).
#[utoipa::path(get, path = "/api/alerts", tag = "alerts", params(AlertsQuery),
    responses((status = 200, description = "alerts", body = AlertsAnswer)))]
async fn alerts_list(
    State(st): State<AppState>,
    Query(q): Query<AlertsQuery>,
) -> Result<Response, ApiError> {
    let rows = st
        .store
        .alerts(q.limit.unwrap_or(200).clamp(1, 5000))
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(AlertsAnswer {
        firing: st.live.alerts_firing(),
        alerts: rows,
    })
    .into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct AckBody {
    #[serde(default)]
    note: String,
}

/// `POST /api/alerts/{id}/ack` `{"note": "…"}`: who acknowledged, when, why.
/// Acknowledges an alert, with a note.
#[utoipa::path(post, path = "/api/alerts/{id}/ack", tag = "alerts", request_body = AckBody,
    params(("id" = i64, Path, description = "the alert")),
    responses((status = 200, description = "the alert", body = Option<app::views::AlertItem>)))]
async fn alert_ack(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<AckBody>,
) -> Result<Response, ApiError> {
    check_note(&b.note).map_err(|m| ApiError::BadRequest(m.into()))?;
    let user = c.user.unwrap_or_default();
    if !st
        .store
        .ack_alert(id, &user, &b.note, wall_now_ms())
        .await
        .map_err(ApiError::Storage)?
    {
        return Err(ApiError::NotFound);
    }
    let row = st.store.alert(id).await.map_err(ApiError::Storage)?;
    Ok(Json(row).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct SilenceBody {
    minutes: u32,
}

/// `POST /api/alerts/{id}/silence` `{"minutes": 60}`: no deliveries or badge until then.
/// Silences an alert for `minutes` (1 to 10080).
#[utoipa::path(post, path = "/api/alerts/{id}/silence", tag = "alerts", request_body = SilenceBody,
    params(("id" = i64, Path, description = "the alert")),
    responses((status = 200, description = "the alert", body = Option<app::views::AlertItem>)))]
async fn alert_silence(
    State(st): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<SilenceBody>,
) -> Result<Response, ApiError> {
    let until =
        silence_until(b.minutes, wall_now_ms()).map_err(|m| ApiError::BadRequest(m.into()))?;
    if !st
        .store
        .silence_alert(id, until)
        .await
        .map_err(ApiError::Storage)?
    {
        return Err(ApiError::NotFound);
    }
    Ok(Json(st.store.alert(id).await.map_err(ApiError::Storage)?).into_response())
}
