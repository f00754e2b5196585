//! Alerts as the store keeps them: the list, acknowledgement, silencing.

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

#[derive(Deserialize)]
struct AlertsQuery {
    limit: Option<u32>,
}

/// `GET /api/alerts`: firing alerts first, then recent history.
async fn alerts_list(
    State(st): State<AppState>,
    Query(q): Query<AlertsQuery>,
) -> Result<Response, ApiError> {
    let rows = st
        .store
        .alerts(q.limit.unwrap_or(200).clamp(1, 5000))
        .await
        .map_err(ApiError::Storage)?;
    Ok(
        Json(serde_json::json!({ "firing": st.live.alerts_firing(), "alerts": rows }))
            .into_response(),
    )
}

#[derive(Deserialize)]
struct AckBody {
    #[serde(default)]
    note: String,
}

/// `POST /api/alerts/{id}/ack` `{"note": "…"}`: who acknowledged, when, why.
async fn alert_ack(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<AckBody>,
) -> Result<Response, ApiError> {
    if b.note.len() > 1000 || b.note.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(
            "note: at most 1000 characters, no control characters".into(),
        ));
    }
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

#[derive(Deserialize)]
struct SilenceBody {
    minutes: u32,
}

/// `POST /api/alerts/{id}/silence` `{"minutes": 60}`: no deliveries or badge until then.
async fn alert_silence(
    State(st): State<AppState>,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<SilenceBody>,
) -> Result<Response, ApiError> {
    if !(1..=7 * 24 * 60).contains(&b.minutes) {
        return Err(ApiError::BadRequest("minutes: 1 to 10080".into()));
    }
    let until = wall_now_ms() + i64::from(b.minutes) * 60_000;
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
