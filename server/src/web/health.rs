//! `/healthz` (the store answers and a tick has been published), `/metrics` (Gantry's
//! own metrics, Prometheus text) and `/metrics/cluster` (the figures Gantry derives,
//! `crate::web::figures`).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;

use super::error::ApiError;
use super::{AppState, Routes};
use crate::clock::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![
        ("/healthz", get(healthz)),
        ("/metrics", get(metrics)),
        ("/metrics/cluster", get(cluster_figures)),
    ]
}

/// The newest tick's figures, with the throttling per reason of the readings behind it.
async fn cluster_figures(State(st): State<AppState>) -> Result<Response, ApiError> {
    let tick = st.live.current().ok_or(ApiError::NotReady)?;
    let by_reason = st
        .live
        .latest()
        .map(|l| crate::live::ReasonCounter::default().count(&tick.overview, l.readings()))
        .unwrap_or_default();
    let body = crate::web::figures::render(&tick.overview, &by_reason, wall_now_ms());
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

/// `GET /healthz`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct Health {
    /// `ok`.
    status: &'static str,
    /// The sequence number of the newest tick.
    seq: u64,
    /// How old the newest tick is (ms).
    data_age_ms: i64,
    /// `leader` (polls, scrapes, alerts) or `standby` (shows the leader's data).
    role: &'static str,
    term: u64,
}

/// Whether this replica serves data: the store answers and a tick was published.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "healthy", body = Health)))]
async fn healthz(State(st): State<AppState>) -> Result<Response, ApiError> {
    st.store.ping().await.map_err(ApiError::Storage)?;
    let tick = st.live.current().ok_or(ApiError::NotReady)?;
    let age_ms = wall_now_ms() - tick.overview.published_ms;
    let term = st
        .live
        .metrics
        .leader_term
        .load(std::sync::atomic::Ordering::Relaxed);
    Ok(Json(Health {
        status: "ok",
        seq: tick.overview.seq,
        data_age_ms: age_ms,
        // Which replica leads (polls, scrapes, alerts); a standby shows the leader's data.
        role: if term > 0 { "leader" } else { "standby" },
        term,
    })
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
