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
use axum::routing::{get, post};
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
    pub auth: crate::config::AuthConfig,
    /// SHA-256 of the ingest token; `None`: ingest is off.
    pub ingest_token_sha256: Option<[u8; 32]>,
    pub actions: Arc<crate::actions::Actions>,
    /// Cost rates of reports (`[reports]`).
    pub rates: Arc<app::reports::Rates>,
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
    #[error("sign in first")]
    Unauthenticated,
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    TooMany(String),
    /// The scheduler refused or did not answer; its words are meant for operators.
    #[error("{0}")]
    Scheduler(String),
    #[error("internal error")]
    Internal(String),
}

impl From<crate::actions::ActionError> for ApiError {
    fn from(e: crate::actions::ActionError) -> ApiError {
        use crate::actions::ActionError as A;
        match e {
            A::Invalid(m) => ApiError::BadRequest(m),
            A::RateLimited(_) => ApiError::TooMany(e.to_string()),
            A::Scheduler(s) => ApiError::Scheduler(s.to_string()),
            A::Audit(s) => ApiError::Storage(s),
        }
    }
}

impl From<crate::reports::ReportError> for ApiError {
    fn from(e: crate::reports::ReportError) -> ApiError {
        use crate::reports::ReportError as R;
        match e {
            R::Query(m) => ApiError::BadRequest(m),
            R::Store(s) => ApiError::Storage(s),
            R::Chart(m) => ApiError::Internal(format!("report chart: {m}")),
        }
    }
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
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Scheduler(m) => {
                tracing::warn!(error = %m, "scheduler call failed");
                StatusCode::BAD_GATEWAY
            }
            ApiError::Internal(m) => {
                tracing::error!(error = %m, "internal error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let body = serde_json::json!({ "error": { "status": status.as_u16(), "message": self.to_string() } });
        (status, Json(body)).into_response()
    }
}

/// Server functions see live state, the store and actions only through this.
struct LiveBackend {
    live: Arc<Live>,
    actions: Arc<crate::actions::Actions>,
    store: Store,
    rates: Arc<app::reports::Rates>,
}

/// An action error in words for the operator; storage internals are logged, not shown.
fn action_message(e: crate::actions::ActionError) -> String {
    match e {
        crate::actions::ActionError::Audit(inner) => {
            tracing::error!(error = %inner, "audit write failed");
            "the audit log cannot be written, so nothing was done".into()
        }
        other => other.to_string(),
    }
}

fn node_row(n: &crate::scheduler::SchedNode, rack: String, jobs: Vec<u64>) -> app::views::NodeRow {
    app::views::NodeRow {
        name: n.name.clone(),
        rack,
        state: n.state,
        raw_state: n.raw_state.join("+"),
        reason: n.reason.clone(),
        gpus_total: n.gpus_total,
        gpus_used: n.gpus_used,
        jobs,
    }
}

fn job_row(j: &crate::scheduler::SchedJob) -> app::views::JobRow {
    app::views::JobRow {
        id: j.job.id,
        name: j.job.name.clone(),
        user: j.job.user.clone(),
        state: j.job.state,
        nodes: j.job.nodes.clone(),
        gpus: j.job.gpus,
        start_ms: j.job.start_ms,
        restart_count: j.restart_count,
        reason: j.state_reason.clone(),
    }
}

impl Backend for LiveBackend {
    fn overview(&self) -> Option<Arc<Overview>> {
        self.live.current().map(|t| Arc::clone(&t.overview))
    }

    fn nodes_view(&self) -> Option<app::views::NodesView> {
        let s = self.live.sched()?;
        let inv = self.live.inventory();
        let rack_of = |n: &str| {
            inv.as_ref()
                .and_then(|i| i.nodes.iter().find(|x| x.name == n).map(|x| x.rack.clone()))
                .unwrap_or_default()
        };
        let mut jobs_on: std::collections::HashMap<&str, Vec<u64>> = Default::default();
        for j in s
            .jobs
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
        {
            for n in &j.job.nodes {
                jobs_on.entry(n.as_str()).or_default().push(j.job.id);
            }
        }
        Some(app::views::NodesView {
            me: app::actions::Me {
                user: None,
                role: None,
            },
            at_ms: s.at_ms,
            polled_ms: s.polled_ms,
            server_now_ms: wall_now_ms(),
            interval_ms: s.interval_ms,
            racks: inv
                .as_ref()
                .map(|i| i.racks.iter().map(|r| r.name.clone()).collect())
                .unwrap_or_default(),
            nodes: s
                .nodes
                .iter()
                .map(|n| {
                    node_row(
                        n,
                        rack_of(&n.name),
                        jobs_on.get(n.name.as_str()).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
            jobs: s
                .jobs
                .iter()
                .filter(|j| !j.job.state.is_finished())
                .map(job_row)
                .collect(),
        })
    }

    fn preview<'a>(
        &'a self,
        kind: app::actions::ActionKind,
        t: &'a app::actions::ActionTargets,
    ) -> app::backend::BackendFuture<'a, app::actions::Preview> {
        Box::pin(async move { self.actions.preview(kind, t).await.map_err(action_message) })
    }

    fn act<'a>(
        &'a self,
        me: &'a app::actions::Me,
        kind: app::actions::ActionKind,
        t: &'a app::actions::ActionTargets,
        reason: Option<&'a str>,
    ) -> app::backend::BackendFuture<'a, app::actions::ActionResult> {
        Box::pin(async move {
            let caller = crate::auth::Caller {
                user: me.user.clone(),
                role: me.role,
            };
            self.actions
                .run(&caller, kind, t, reason)
                .await
                .map_err(action_message)
        })
    }

    fn node_detail<'a>(
        &'a self,
        name: &'a str,
    ) -> app::backend::BackendFuture<'a, Option<app::views::NodeDetail>> {
        Box::pin(async move {
            let tick = self.live.current();
            let tile = tick
                .as_ref()
                .and_then(|t| t.overview.nodes.iter().find(|n| n.name == name).cloned());
            let sched = self.live.sched();
            let running: Vec<&crate::scheduler::SchedJob> = sched
                .iter()
                .flat_map(|s| s.jobs.iter())
                .filter(|j| {
                    j.job.state == app::model::JobState::Running
                        && j.job.nodes.iter().any(|n| n == name)
                })
                .collect();
            let slurm = sched
                .as_ref()
                .and_then(|s| s.nodes.iter().find(|n| n.name == name))
                .map(|n| {
                    node_row(
                        n,
                        tile.as_ref().map(|t| t.rack.clone()).unwrap_or_default(),
                        running.iter().map(|j| j.job.id).collect(),
                    )
                });
            if tile.is_none() && slurm.is_none() {
                return Ok(None);
            }
            let gpus = self
                .live
                .latest()
                .map(|l| {
                    l.readings()
                        .gpus
                        .iter()
                        .filter(|g| g.node == name)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let xids = self
                .store
                .xids(name)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "XID read failed");
                    "storage unavailable".to_string()
                })?
                .into_iter()
                .take(50)
                .map(|(gpu, xid, at_ms)| app::views::XidSeen { gpu, xid, at_ms })
                .collect();
            let (at_ms, published_ms, interval_ms) = tick
                .as_ref()
                .map(|t| {
                    (
                        t.overview.at_ms,
                        t.overview.published_ms,
                        t.overview.interval_ms,
                    )
                })
                .unwrap_or((0, 0, 1000));
            Ok(Some(app::views::NodeDetail {
                me: app::actions::Me {
                    user: None,
                    role: None,
                },
                name: name.to_string(),
                tile,
                slurm,
                gpus,
                jobs: running.into_iter().map(job_row).collect(),
                xids,
                at_ms,
                published_ms,
                server_now_ms: wall_now_ms(),
                interval_ms,
            }))
        })
    }

    fn job_detail(
        &self,
        id: u64,
    ) -> app::backend::BackendFuture<'_, Option<app::views::JobDetail>> {
        Box::pin(async move {
            let fail = |e: crate::store::StoreError| {
                tracing::error!(error = %e, "job read failed");
                "storage unavailable".to_string()
            };
            let live_job = self
                .live
                .sched()
                .and_then(|s| s.jobs.iter().find(|j| j.job.id == id).cloned());
            let stored = self.store.job(id).await.map_err(fail)?;
            let (job, restart_count, reason) = match (live_job, stored) {
                (Some(j), _) => (j.job, j.restart_count, j.state_reason),
                (None, Some(job)) => {
                    let n = self
                        .store
                        .requeue_count(id)
                        .await
                        .map_err(fail)?
                        .unwrap_or(0);
                    (job, n as u32, None)
                }
                (None, None) => return Ok(None),
            };
            let events = self.store.job_events(id).await.map_err(fail)?;
            let mut checkpoints = self.store.checkpoints(id).await.map_err(fail)?;
            checkpoints.sort_by_key(|c| (c.started_ms, c.step));
            let now_ms = self.live.source_now();
            // Runs from the transitions: a start, then how it ended.
            let mut runs: Vec<(i64, Option<i64>, bool)> = Vec::new();
            for e in &events {
                use app::model::JobState as S;
                match e.state {
                    S::Running if runs.last().is_none_or(|r| r.1.is_some()) => {
                        runs.push((e.at_ms, None, false));
                    }
                    S::Requeued
                    | S::Failed
                    | S::NodeFail
                    | S::Timeout
                    | S::Completed
                    | S::Cancelled => {
                        if let Some(r) = runs.last_mut().filter(|r| r.1.is_none()) {
                            r.1 = Some(e.at_ms);
                            r.2 = matches!(
                                e.state,
                                S::Requeued | S::Failed | S::NodeFail | S::Timeout
                            );
                        }
                    }
                    _ => {}
                }
            }
            // A run the history missed the start of, still going: it started at the job's start.
            if job.state == app::model::JobState::Running
                && runs.last().is_none_or(|r| r.1.is_some())
            {
                if let Some(s) = job.start_ms {
                    runs.push((s, None, false));
                }
            }
            if job.state != app::model::JobState::Running {
                if let Some(r) = runs.last_mut().filter(|r| r.1.is_none()) {
                    r.1 = job.end_ms.or(Some(now_ms));
                }
            }
            let (lost, at_risk) =
                app::views::work_lost_and_at_risk(job.gpus, &runs, &checkpoints, now_ms);
            let last_good = checkpoints
                .iter()
                .filter(|c| c.complete && c.started_ms + c.duration_ms <= now_ms)
                .max_by_key(|c| c.started_ms + c.duration_ms)
                .cloned();
            Ok(Some(app::views::JobDetail {
                me: app::actions::Me {
                    user: None,
                    role: None,
                },
                job,
                restart_count,
                reason,
                transitions: events
                    .into_iter()
                    .map(|e| app::views::JobTransition {
                        at_ms: e.at_ms,
                        state: e.state,
                        nodes: e.nodes,
                        detail: e.detail,
                    })
                    .collect(),
                checkpoints,
                last_good,
                work_at_risk_gpu_hours: at_risk,
                lost_gpu_hours: lost,
                now_ms,
            }))
        })
    }

    fn report<'a>(
        &'a self,
        q: &'a app::reports::ReportQuery,
    ) -> app::backend::BackendFuture<'a, app::reports::Report> {
        Box::pin(async move {
            let now = self.live.source_now();
            crate::reports::build(&self.store, q, now, &self.rates)
                .await
                .map_err(|e| match e {
                    crate::reports::ReportError::Query(m) => m,
                    other => {
                        tracing::error!(error = %other, "report failed");
                        "the report cannot be computed now (storage unavailable)".into()
                    }
                })
        })
    }

    fn timeline(
        &self,
        hours: u32,
        end_ms: Option<i64>,
        group: app::timeline::Grouping,
    ) -> app::backend::BackendFuture<'_, app::timeline::TimelineData> {
        Box::pin(async move {
            let inv = self.live.inventory().ok_or("no inventory yet")?;
            let now = self.live.source_now();
            let hours = hours.clamp(1, 168);
            let to = end_ms.unwrap_or(now).min(now);
            let from = to - i64::from(hours) * 3_600_000;
            // Runs that started up to 7 days before the window may still be in it.
            let events = self
                .store
                .job_events_between(from - 7 * 86_400_000, to)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "timeline read failed");
                    "storage unavailable".to_string()
                })?;
            let runs = crate::timeline::runs(&events);
            let node_events = self
                .store
                .node_events_between(from - 7 * 86_400_000, to)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "timeline read failed");
                    "storage unavailable".to_string()
                })?;
            let spans = crate::timeline::node_spans(&node_events, to);
            let names: std::collections::HashMap<u64, String> = self
                .live
                .sched()
                .map(|s| {
                    s.jobs
                        .iter()
                        .map(|j| (j.job.id, j.job.name.clone()))
                        .collect()
                })
                .unwrap_or_default();
            Ok(crate::timeline::data(
                &inv, group, &runs, &names, &spans, from, to, now,
            ))
        })
    }

    fn job_history<'a>(
        &'a self,
        f: &'a app::views::JobFilter,
    ) -> app::backend::BackendFuture<'a, (Vec<app::model::Job>, u64)> {
        Box::pin(async move {
            self.store.jobs_filtered(f).await.map_err(|e| {
                tracing::error!(error = %e, "job history read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn alerts(&self, limit: u32) -> app::backend::BackendFuture<'_, Vec<app::views::AlertItem>> {
        Box::pin(async move {
            self.store.alerts(limit).await.map_err(|e| {
                tracing::error!(error = %e, "alerts read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn alerts_firing(&self) -> u32 {
        self.live.alerts_firing()
    }

    fn ack_alert<'a>(
        &'a self,
        me: &'a app::actions::Me,
        id: i64,
        note: &'a str,
    ) -> app::backend::BackendFuture<'a, ()> {
        Box::pin(async move {
            if !me.can_act() {
                return Err("operators acknowledge alerts".into());
            }
            if note.len() > 1000 || note.chars().any(char::is_control) {
                return Err("note: at most 1000 characters, no control characters".into());
            }
            let user = me.user.clone().unwrap_or_default();
            match self.store.ack_alert(id, &user, note, wall_now_ms()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("no alert {id}")),
                Err(e) => {
                    tracing::error!(error = %e, "alert ack failed");
                    Err("storage unavailable".into())
                }
            }
        })
    }

    fn silence_alert(&self, id: i64, minutes: u32) -> app::backend::BackendFuture<'_, ()> {
        Box::pin(async move {
            if !(1..=7 * 24 * 60).contains(&minutes) {
                return Err("minutes: 1 to 10080".into());
            }
            match self
                .store
                .silence_alert(id, wall_now_ms() + i64::from(minutes) * 60_000)
                .await
            {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("no alert {id}")),
                Err(e) => {
                    tracing::error!(error = %e, "alert silence failed");
                    Err("storage unavailable".into())
                }
            }
        })
    }

    fn audit<'a>(
        &'a self,
        f: &'a app::actions::AuditFilter,
    ) -> app::backend::BackendFuture<'a, Vec<app::actions::AuditEntry>> {
        Box::pin(async move {
            self.store.audit(f).await.map_err(|e| {
                tracing::error!(error = %e, "audit read failed");
                "storage unavailable".to_string()
            })
        })
    }
}

/// Records every path it routes, so tests can enumerate the router.
struct Table {
    router: Router<AppState>,
    paths: Vec<String>,
}

impl Table {
    fn route(mut self, path: &str, m: axum::routing::MethodRouter<AppState>) -> Table {
        self.paths.push(path.to_string());
        self.router = self.router.route(path, m);
        self
    }
}

/// The whole application router, and every path it serves (axum routes, pages, server functions), for the
/// test that proves each one is guarded.
pub fn router_with_paths(state: AppState) -> (Router, Vec<String>) {
    let routes = generate_route_list(app::App);
    let backend = BackendHandle(Arc::new(LiveBackend {
        live: Arc::clone(&state.live),
        actions: Arc::clone(&state.actions),
        store: state.store.clone(),
        rates: Arc::clone(&state.rates),
    }));
    let leptos = state.leptos.clone();
    let timeout = state.request_timeout;
    let mut t = Table {
        router: Router::new(),
        paths: Vec::new(),
    }
    .route("/healthz", get(healthz))
    .route("/metrics", get(metrics))
    .route("/auth/login", post(crate::auth::login))
    .route("/auth/logout", post(crate::auth::logout))
    .route("/api/whoami", get(crate::auth::whoami))
    .route("/api/live", get(live_sse))
    .route("/api/targets", get(targets))
    .route("/api/history", get(history))
    .route("/api/charts/history.svg", get(history_svg))
    .route("/api/charts/job/{id}/activity.svg", get(job_activity_svg))
    .route("/api/charts/throttling.svg", get(throttling_svg))
    .route("/api/nodes", get(nodes))
    .route("/api/jobs", get(jobs))
    .route("/api/actions/preview", post(action_preview))
    .route("/api/actions/drain", post(action_drain))
    .route("/api/actions/resume", post(action_resume))
    .route("/api/actions/requeue", post(action_requeue))
    .route("/api/audit", get(audit))
    .route("/api/reports", get(report_get))
    .route("/api/reports/charts/{file}", get(report_chart))
    .route("/api/alerts", get(alerts_list))
    .route("/api/alerts/{id}/ack", post(alert_ack))
    .route("/api/alerts/{id}/silence", post(alert_silence))
    .route("/api/ingest/checkpoint", post(ingest_checkpoint))
    .route("/api/ingest/nccl", post(ingest_nccl));
    if state.simulated {
        t = t
            .route("/sim/truth", get(sim_truth))
            .route("/sim/exporter/dcgm/{node}/metrics", get(sim_dcgm))
            .route("/sim/exporter/ipmi/{node}/metrics", get(sim_ipmi))
            .route("/sim/exporter/node/{node}/metrics", get(sim_node));
    }
    let mut paths = t.paths;
    paths.extend(routes.iter().map(|r| r.path().to_string()));
    paths.extend(leptos::server_fn::axum::server_fn_paths().map(|(p, _)| p.to_string()));
    let guard = axum::middleware::from_fn_with_state(state.clone(), crate::auth::guard);
    let router = t
        .router
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(backend.clone()),
            move || app::shell(leptos.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(
            app::shell,
        ))
        .layer(guard)
        .layer(CompressionLayer::new())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        // Failures that matter are logged once, where they become an `ApiError`; a 503 from a
        // simulated down node's exporter every second is not news.
        .layer(
            TraceLayer::new_for_http()
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .with_state(state);
    (router, paths)
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

/// `GET /api/charts/history.svg?scope=S&metric=M`: the same series as `/api/history`, as
/// an SVG line chart (plotters), titled and labelled with units and UTC times.
async fn history_svg(
    State(st): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    use crate::window::{Metric, Scope};
    let scope = Scope::parse(&q.scope).ok_or_else(|| {
        ApiError::BadRequest("scope must be cluster, rack:NAME, node:NAME or gpu:NODE:INDEX".into())
    })?;
    let metric =
        Metric::parse(&q.metric).ok_or_else(|| ApiError::BadRequest("unknown metric".into()))?;
    let points = st
        .live
        .history(&scope, metric, q.since_ms.unwrap_or(0))
        .ok_or(ApiError::NotFound)?;
    let (what, y_label, y_scale) = match metric {
        Metric::PowerWatts => ("power", "power (W)", 1.0),
        Metric::TempCelsius => (
            "GPU temperature (hottest GPU for a node)",
            "temperature (°C)",
            1.0,
        ),
        Metric::SmActiveRatio => ("SM activity", "SM activity (%)", 100.0),
        Metric::SmClockMhz => ("SM clock", "SM clock (MHz)", 1.0),
        Metric::InletCelsius => ("inlet temperature", "inlet (°C)", 1.0),
        Metric::GpusThrottling => ("GPUs throttling", "GPUs", 1.0),
    };
    let title = format!("{} {what}, last hour", q.scope);
    let svg = crate::charts::line_svg(
        &crate::charts::LineChart {
            title: &title,
            y_label,
            y_scale,
        },
        &points,
    )
    .map_err(ApiError::Internal)?;
    Ok(svg_response(svg))
}

#[derive(Deserialize)]
struct ThrottlingQuery {
    /// `cluster` or `rack:NAME`.
    scope: Option<String>,
    hours: Option<u32>,
}

/// `GET /api/charts/throttling.svg?scope=cluster&hours=24`: GPUs throttling, the most in
/// each minute, from the one-minute rollups.
async fn throttling_svg(
    State(st): State<AppState>,
    Query(q): Query<ThrottlingQuery>,
) -> Result<Response, ApiError> {
    let scope = q.scope.unwrap_or_else(|| "cluster".into());
    if !(scope == "cluster" || scope.starts_with("rack:")) || scope.len() > 80 {
        return Err(ApiError::BadRequest(
            "scope must be cluster or rack:NAME".into(),
        ));
    }
    let hours = q.hours.unwrap_or(24).clamp(1, 168);
    let now = st.live.source_now();
    let rows = st
        .store
        .rollups(&scope, now - i64::from(hours) * 3_600_000, now + 1)
        .await
        .map_err(ApiError::Storage)?;
    let points: Vec<(i64, Option<f32>)> = rows
        .iter()
        .map(|r| (r.at_ms, Some(r.gpus_throttling_max as f32)))
        .collect();
    let title = format!("{scope}: GPUs throttling (most per minute), last {hours} h");
    let svg = crate::charts::line_svg(
        &crate::charts::LineChart {
            title: &title,
            y_label: "GPUs",
            y_scale: 1.0,
        },
        &points,
    )
    .map_err(ApiError::Internal)?;
    Ok(svg_response(svg))
}

/// An SVG chart as the answer: not cached, since it is drawn from live data.
fn svg_response(svg: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
        .into_response()
}

/// `GET /api/charts/job/{id}/activity.svg`: the job's mean SM activity per minute since it
/// started (at most 7 days), from the one-minute rollups.
async fn job_activity_svg(
    State(st): State<AppState>,
    Path(id): Path<u64>,
) -> Result<Response, ApiError> {
    let job = st
        .store
        .job(id)
        .await
        .map_err(ApiError::Storage)?
        .ok_or(ApiError::NotFound)?;
    let now = st.live.source_now();
    let from = job
        .start_ms
        .unwrap_or(job.submit_ms)
        .max(now - 7 * 86_400_000);
    let rows = st
        .store
        .rollups(&format!("job:{id}"), from, now + 1)
        .await
        .map_err(ApiError::Storage)?;
    let points: Vec<(i64, Option<f32>)> = rows
        .iter()
        .map(|r| (r.at_ms, r.sm_active_mean.map(|x| x as f32)))
        .collect();
    let title = format!("job {id}: mean SM activity of its GPUs, per minute");
    let svg = crate::charts::line_svg(
        &crate::charts::LineChart {
            title: &title,
            y_label: "SM activity (%)",
            y_scale: 100.0,
        },
        &points,
    )
    .map_err(ApiError::Internal)?;
    Ok(svg_response(svg))
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

async fn sim_node(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_node)
}

fn snapshot_event(overview: &Overview) -> Event {
    let snap = LiveSnapshot {
        server_now_ms: wall_now_ms(),
        overview: overview.clone(),
    };
    Event::default()
        .event(EVENT_SNAPSHOT)
        .id(app::live::resume_id(overview))
        .data(serde_json::to_string(&snap).unwrap_or_default())
}

fn delta_event(tick: &Tick) -> Event {
    Event::default()
        .event(EVENT_DELTA)
        .id(app::live::resume_id(&tick.overview))
        .data(&*tick.delta_json)
}

/// `GET /api/live`'s query: the sequence the client already shows (a page rendered on the
/// server carries it), so it needs no snapshot when it is current.
#[derive(Deserialize)]
struct LiveQuery {
    since: Option<String>,
}

/// The first event of a stream for a client that shows `since` (a sequence and when it was
/// published, `app::live::resume_id`): nothing when that is the current tick, the tick's
/// delta when it is the one before, else a snapshot. The publication time tells this
/// process's sequence 57 from a previous process's.
fn first_event(tick: &Tick, since: Option<(u64, app::model::UnixMs)>) -> Option<Event> {
    let now = (tick.overview.seq, tick.overview.published_ms);
    let before = tick.from_published_ms.map(|p| (tick.from_seq, p));
    match since {
        Some(s) if s == now => None,
        Some(s) if Some(s) == before && !tick.reshaped => Some(delta_event(tick)),
        _ => Some(snapshot_event(&tick.overview)),
    }
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
    headers: axum::http::HeaderMap,
    Query(q): Query<LiveQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Subscribe before reading the current tick, so nothing falls between the two.
    let rx = st.live.subscribe();
    let first = st.live.current().ok_or(ApiError::NotReady)?;
    // What the client shows: the browser's own reconnection says it in `Last-Event-ID`
    // (every event's id names its tick), a first connection in `?since=`. Anything
    // unreadable is a client that shows nothing usable: it gets a snapshot.
    let since = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.since.as_deref())
        .and_then(app::live::parse_resume_id);
    let state = StreamState {
        pending: first_event(&first, since),
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
                    Ok(tick) if tick.from_seq == s.last_seq && !tick.reshaped => {
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(delta_event(&tick)), s));
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

/// `GET /api/nodes`: every node as of the last scheduler poll.
async fn nodes(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    Ok(Json(serde_json::json!({
        "at_ms": s.at_ms,
        "polled_ms": s.polled_ms,
        "nodes": &s.nodes,
    }))
    .into_response())
}

/// `GET /api/jobs`: pending and running jobs as of the last scheduler poll.
async fn jobs(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    Ok(Json(serde_json::json!({
        "at_ms": s.at_ms,
        "polled_ms": s.polled_ms,
        "jobs": &s.jobs,
    }))
    .into_response())
}

/// The body of every action: targets, plus a reason (drain) or hold (requeue).
#[derive(Deserialize)]
struct ActionBody {
    /// Only for `/api/actions/preview`.
    action: Option<app::actions::ActionKind>,
    #[serde(flatten)]
    targets: app::actions::ActionTargets,
    reason: Option<String>,
    #[serde(default)]
    hold: bool,
}

fn json_body(
    body: Result<Json<ActionBody>, axum::extract::rejection::JsonRejection>,
) -> Result<ActionBody, ApiError> {
    body.map(|Json(b)| b)
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {}", e.body_text())))
}

type BodyResult = Result<Json<ActionBody>, axum::extract::rejection::JsonRejection>;

async fn action_preview(
    State(st): State<AppState>,
    body: BodyResult,
) -> Result<Response, ApiError> {
    let b = json_body(body)?;
    let kind = b.action.ok_or_else(|| {
        ApiError::BadRequest("action is required: drain, resume, requeue or requeue_hold".into())
    })?;
    Ok(Json(st.actions.preview(kind, &b.targets).await?).into_response())
}

async fn run_action(
    st: &AppState,
    caller: &crate::auth::Caller,
    kind: app::actions::ActionKind,
    b: &ActionBody,
) -> Result<Response, ApiError> {
    let result = st
        .actions
        .run(caller, kind, &b.targets, b.reason.as_deref())
        .await?;
    let status = if result.all_ok() {
        StatusCode::OK
    } else {
        // Some target failed or could not be verified: the body says which.
        StatusCode::MULTI_STATUS
    };
    Ok((status, Json(result)).into_response())
}

async fn action_drain(
    State(st): State<AppState>,
    axum::Extension(c): axum::Extension<crate::auth::Caller>,
    body: BodyResult,
) -> Result<Response, ApiError> {
    let b = json_body(body)?;
    run_action(&st, &c, app::actions::ActionKind::Drain, &b).await
}

async fn action_resume(
    State(st): State<AppState>,
    axum::Extension(c): axum::Extension<crate::auth::Caller>,
    body: BodyResult,
) -> Result<Response, ApiError> {
    let b = json_body(body)?;
    run_action(&st, &c, app::actions::ActionKind::Resume, &b).await
}

async fn action_requeue(
    State(st): State<AppState>,
    axum::Extension(c): axum::Extension<crate::auth::Caller>,
    body: BodyResult,
) -> Result<Response, ApiError> {
    let b = json_body(body)?;
    let kind = if b.hold {
        app::actions::ActionKind::RequeueHold
    } else {
        app::actions::ActionKind::Requeue
    };
    run_action(&st, &c, kind, &b).await
}

#[derive(Deserialize)]
struct AuditQuery {
    #[serde(flatten)]
    filter: app::actions::AuditFilter,
    format: Option<String>,
}

/// The report query of a request's URL (`period`, `group`, `at`, `from`, `to`).
fn report_query(
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

/// `GET /api/reports?period=&group=&at=&from=&to=[&format=csv]`: the report as JSON (with
/// its charts as SVG) or as CSV (one line per group, then unallocated and total).
async fn report_get(
    State(st): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let (q, format) = report_query(&pairs)?;
    let now = st.live.source_now();
    match format.as_deref() {
        None | Some("json") => {
            let r = crate::reports::build(&st.store, &q, now, &st.rates).await?;
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
            Ok((
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}\""),
                    ),
                ],
                crate::reports::csv(&r, &st.rates.currency),
            )
                .into_response())
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "unknown format {other:?}: json or csv"
        ))),
    }
}

/// `GET /api/reports/charts/{utilization|goodput|cost}.{svg|png}?period=...`: one chart
/// of a report, as a download.
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

/// `GET /api/audit?user=&action=&target=&limit=&format=csv`.
async fn audit(
    State(st): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<Response, ApiError> {
    let rows = st.store.audit(&q.filter).await.map_err(ApiError::Storage)?;
    if q.format.as_deref() == Some("csv") {
        let mut out =
            String::from("id,at_utc,user,role,action,target,detail,status,result,finished_utc\n");
        for r in &rows {
            let fields = [
                r.id.to_string(),
                app::units::utc(r.at_ms),
                r.user.clone(),
                r.role.clone(),
                r.action.clone(),
                r.target.clone(),
                r.detail.clone(),
                r.status.clone(),
                r.result.clone(),
                r.finished_ms.map(app::units::utc).unwrap_or_default(),
            ];
            let line: Vec<String> = fields.iter().map(|f| app::units::csv_field(f)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        return Ok((
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"gantry-audit.csv\"",
                ),
            ],
            out,
        )
            .into_response());
    }
    Ok(Json(serde_json::json!({ "entries": rows })).into_response())
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
    axum::Extension(c): axum::Extension<crate::auth::Caller>,
    Path(id): Path<i64>,
    body: Result<Json<AckBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(b) =
        body.map_err(|e| ApiError::BadRequest(format!("invalid request body: {}", e.body_text())))?;
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
    body: Result<Json<SilenceBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(b) =
        body.map_err(|e| ApiError::BadRequest(format!("invalid request body: {}", e.body_text())))?;
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

/// A job the scheduler lists now, or one in the job history.
async fn known_job(st: &AppState, id: u64) -> Result<(), ApiError> {
    let now = st
        .live
        .sched()
        .is_some_and(|s| s.jobs.iter().any(|j| j.job.id == id));
    if now || st.store.job(id).await.map_err(ApiError::Storage)?.is_some() {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "unknown job {id}: Gantry has not seen it in the scheduler"
        )))
    }
}

/// The ingest token check: a bearer token whose SHA-256 matches.
fn ingest_allowed(st: &AppState, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    use sha2::{Digest, Sha256};
    let Some(want) = st.ingest_token_sha256 else {
        return Err(ApiError::Forbidden("ingest is off: set ingest_token"));
    };
    let got = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(ApiError::Unauthenticated)?;
    let digest: [u8; 32] = Sha256::digest(got.as_bytes()).into();
    if digest == want {
        Ok(())
    } else {
        Err(ApiError::Unauthenticated)
    }
}

#[derive(Deserialize)]
struct CheckpointEvent {
    job_id: u64,
    step: u64,
    bytes: u64,
    duration_ms: i64,
    path: String,
    /// `complete` or `failed`.
    status: String,
    /// When the save started; default: now minus the duration.
    started_ms: Option<i64>,
}

/// `POST /api/ingest/checkpoint`: a training job reports a checkpoint save.
async fn ingest_checkpoint(
    State(st): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Json<CheckpointEvent>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    ingest_allowed(&st, &headers)?;
    let Json(e) = body.map_err(|e| {
        ApiError::BadRequest(format!("invalid checkpoint event: {}", e.body_text()))
    })?;
    let complete = match e.status.as_str() {
        "complete" => true,
        "failed" => false,
        other => {
            return Err(ApiError::BadRequest(format!(
                "status {other:?}: expected complete or failed"
            )))
        }
    };
    if e.path.is_empty() || e.path.len() > 4096 || e.duration_ms < 0 {
        return Err(ApiError::BadRequest(
            "path: 1 to 4096 bytes; duration_ms: not negative".into(),
        ));
    }
    known_job(&st, e.job_id).await?;
    let c = app::model::Checkpoint {
        job_id: e.job_id,
        step: e.step,
        path: e.path,
        size_bytes: e.bytes,
        started_ms: e
            .started_ms
            .unwrap_or_else(|| wall_now_ms() - e.duration_ms),
        duration_ms: e.duration_ms,
        complete,
    };
    st.store
        .put_checkpoint(&c)
        .await
        .map_err(ApiError::Storage)?;
    if c.complete {
        st.live
            .checkpoint_seen(c.job_id, c.started_ms + c.duration_ms);
    }
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({"recorded": true})),
    )
        .into_response())
}

#[derive(Deserialize)]
struct NcclEvent {
    job_id: u64,
    step: u64,
    latency_us: f64,
    message_bytes: Option<u64>,
    at_ms: Option<i64>,
}

/// `POST /api/ingest/nccl`: one step's all-reduce latency.
async fn ingest_nccl(
    State(st): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Json<NcclEvent>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    ingest_allowed(&st, &headers)?;
    let Json(e) =
        body.map_err(|e| ApiError::BadRequest(format!("invalid NCCL sample: {}", e.body_text())))?;
    if !(e.latency_us.is_finite() && e.latency_us >= 0.0 && e.latency_us < 1e9) {
        return Err(ApiError::BadRequest(
            "latency_us must be a number from 0 to 1e9".into(),
        ));
    }
    known_job(&st, e.job_id).await?;
    st.store
        .put_nccl(
            e.job_id,
            e.step,
            e.at_ms.unwrap_or_else(wall_now_ms),
            e.latency_us,
            e.message_bytes,
        )
        .await
        .map_err(ApiError::Storage)?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({"recorded": true})),
    )
        .into_response())
}
