//! The web layer: axum routes, the live SSE stream, Leptos pages and server functions.
//!
//! It only translates between HTTP and the services below it. One error envelope
//! ([`ApiError`]): internals are logged once here and never sent to the browser.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use app::backend::{Backend, BackendHandle};
use app::live::{LiveSnapshot, Overview, EVENT_DELTA, EVENT_SNAPSHOT};
use axum::extract::{FromRef, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};
use tower_http::compression::CompressionLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::live::{wall_now_ms, Live, Tick};
use crate::store::Store;

/// Everything handlers need, built once at start.
#[derive(Clone)]
pub struct AppState {
    pub leptos: LeptosOptions,
    pub live: Arc<Live>,
    pub store: Store,
    /// Turns true when the server is shutting down; live streams end on it.
    pub shutdown: watch::Receiver<bool>,
    /// Whether `/sim/truth` exists (only when the simulator is the source).
    pub simulated: bool,
    pub request_timeout: Duration,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(s: &AppState) -> LeptosOptions {
        s.leptos.clone()
    }
}

/// The one error type at the HTTP boundary.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("no data yet: the first readings have not arrived")]
    NotReady,
    #[error("not found")]
    NotFound,
    #[error("node is down: its exporter does not answer")]
    NodeDown,
    #[error("{0}")]
    BadRequest(String),
    #[error("storage unavailable")]
    Storage(#[source] crate::store::StoreError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::NodeDown => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Storage(e) => {
                // Logged once, here; the client gets no internals.
                tracing::error!(error = %e, "storage error");
                StatusCode::SERVICE_UNAVAILABLE
            }
        };
        let body = serde_json::json!({ "error": { "status": status.as_u16(), "message": self.to_string() } });
        (status, Json(body)).into_response()
    }
}

/// Server functions see live state only through this.
struct LiveBackend(Arc<Live>);

impl Backend for LiveBackend {
    fn overview(&self) -> Option<Arc<Overview>> {
        self.0.current().map(|t| Arc::clone(&t.overview))
    }
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(app::App);
    let backend = BackendHandle(Arc::new(LiveBackend(Arc::clone(&state.live))));
    let leptos = state.leptos.clone();
    let timeout = state.request_timeout;
    let mut r = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/live", get(live_sse))
        .route("/api/targets", get(targets))
        .route("/api/history", get(history));
    if state.simulated {
        r = r
            .route("/sim/truth", get(sim_truth))
            .route("/sim/exporter/dcgm/{node}/metrics", get(sim_dcgm))
            .route("/sim/exporter/ipmi/{node}/metrics", get(sim_ipmi));
    }
    r.leptos_routes_with_context(
        &state,
        routes,
        move || provide_context(backend.clone()),
        move || app::shell(leptos.clone()),
    )
    .fallback(leptos_axum::file_and_error_handler::<AppState, _>(
        app::shell,
    ))
    .layer(CompressionLayer::new())
    .layer(TimeoutLayer::with_status_code(
        StatusCode::REQUEST_TIMEOUT,
        timeout,
    ))
    // Failures that matter are logged once, where they become an `ApiError`; a 503 from a
    // simulated down node's exporter every second is not news.
    .layer(
        TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
    )
    .with_state(state)
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

/// Health of every scrape target: last success, last error, duration, samples.
async fn targets(State(st): State<AppState>) -> impl IntoResponse {
    Json(serde_json::json!({ "targets": &*st.live.targets() }))
}

#[derive(Deserialize)]
struct HistoryQuery {
    scope: String,
    metric: String,
    since_ms: Option<i64>,
}

/// A series of the hot window: `?scope=cluster|rack:A01|node:gpu001|gpu:gpu001:3
/// &metric=power_watts|temp_celsius|sm_active_ratio|sm_clock_mhz|inlet_celsius|gpus_throttling`.
async fn history(
    State(st): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    use crate::window::{Metric, Scope};
    let scope = Scope::parse(&q.scope).ok_or_else(|| {
        ApiError::BadRequest("scope must be cluster, rack:NAME, node:NAME or gpu:NODE:INDEX".into())
    })?;
    let metric = Metric::parse(&q.metric).ok_or_else(|| {
        ApiError::BadRequest(
            "metric must be power_watts, temp_celsius, sm_active_ratio, sm_clock_mhz, inlet_celsius or gpus_throttling"
                .into(),
        )
    })?;
    let points = st
        .live
        .history(&scope, metric, q.since_ms.unwrap_or(0))
        .ok_or(ApiError::NotFound)?;
    Ok(
        Json(serde_json::json!({ "scope": q.scope, "metric": metric, "points": points }))
            .into_response(),
    )
}

#[derive(Deserialize)]
struct TruthQuery {
    seq: Option<u64>,
}

/// The simulator's ground truth (at tick `seq` if given), for tests and outside checks.
async fn sim_truth(
    State(st): State<AppState>,
    Query(q): Query<TruthQuery>,
) -> Result<Response, ApiError> {
    let t = st.live.truth(q.seq).ok_or(match q.seq {
        Some(_) => ApiError::NotFound,
        None => ApiError::NotReady,
    })?;
    Ok(Json(serde_json::json!({ "seq": q.seq, "truth": &*t })).into_response())
}

/// Serves one simulated node's exporter text, as its exporter would.
fn sim_exporter(
    st: &AppState,
    node: &str,
    render: fn(&app::model::Inventory, &crate::aggregate::Readings, &str) -> Option<String>,
) -> Result<Response, ApiError> {
    let frame = st.live.sim_frame().ok_or(ApiError::NotReady)?;
    if !frame.inventory.nodes.iter().any(|n| n.name == node) {
        return Err(ApiError::NotFound);
    }
    // A down node's exporter does not answer; over a shared listener that is a 503.
    let body = render(&frame.inventory, &frame.readings, node).ok_or(ApiError::NodeDown)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

async fn sim_dcgm(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_dcgm)
}

async fn sim_ipmi(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_ipmi)
}

fn snapshot_event(overview: &Overview) -> Event {
    let snap = LiveSnapshot {
        server_now_ms: wall_now_ms(),
        overview: overview.clone(),
    };
    Event::default()
        .event(EVENT_SNAPSHOT)
        .data(serde_json::to_string(&snap).unwrap_or_default())
}

struct StreamState {
    pending: Option<Event>,
    last_seq: u64,
    rx: broadcast::Receiver<Arc<Tick>>,
    live: Arc<Live>,
    shutdown: watch::Receiver<bool>,
    _guard: crate::metrics::SseClientGuard,
}

/// `/api/live`: a snapshot first, then one delta per tick. A client that falls behind
/// gets a fresh snapshot; every stream ends when the server shuts down.
async fn live_sse(
    State(st): State<AppState>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Subscribe before reading the current tick, so nothing falls between the two.
    let rx = st.live.subscribe();
    let first = st.live.current().ok_or(ApiError::NotReady)?;
    let state = StreamState {
        pending: Some(snapshot_event(&first.overview)),
        last_seq: first.overview.seq,
        rx,
        live: Arc::clone(&st.live),
        shutdown: st.shutdown.clone(),
        _guard: st.live.metrics.sse_client(),
    };
    let s = stream::unfold(state, |mut s| async move {
        if let Some(ev) = s.pending.take() {
            return Some((Ok(ev), s));
        }
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = s.shutdown.changed() => return None,
                msg = s.rx.recv() => match msg {
                    Ok(tick) if tick.overview.seq <= s.last_seq => continue,
                    Ok(tick) if tick.from_seq == s.last_seq => {
                        s.last_seq = tick.overview.seq;
                        let ev = Event::default().event(EVENT_DELTA).data(&*tick.delta_json);
                        return Some((Ok(ev), s));
                    }
                    Ok(tick) => {
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick.overview)), s));
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let Some(tick) = s.live.current() else { continue };
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick.overview)), s));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    });
    Ok(Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
