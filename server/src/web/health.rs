//! `/healthz` (the store answers and a tick has been published) and `/metrics` (Gantry's
//! own metrics, Prometheus text).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;

use super::error::ApiError;
use super::{AppState, Routes};
use crate::live::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![("/healthz", get(healthz)), ("/metrics", get(metrics))]
}

async fn healthz(State(st): State<AppState>) -> Result<Response, ApiError> {
    st.store.ping().await.map_err(ApiError::Storage)?;
    let tick = st.live.current().ok_or(ApiError::NotReady)?;
    let age_ms = wall_now_ms() - tick.overview.published_ms;
    Ok(Json(serde_json::json!({
        "status": "ok",
        "seq": tick.overview.seq,
        "data_age_ms": age_ms,
    }))
    .into_response())
}

async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.live.metrics.render(),
    )
}
