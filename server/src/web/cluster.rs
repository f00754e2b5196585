//! The cluster as it is now and was in the last hour: nodes, jobs, scrape targets, the hot
//! window's series, and charts of them (SVG).

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Path, Query};
use super::{AppState, Routes};

pub(super) fn routes() -> Routes {
    vec![
        ("/api/targets", get(targets)),
        ("/api/history", get(history)),
        ("/api/charts/history.svg", get(history_svg)),
        ("/api/charts/job/{id}/activity.svg", get(job_activity_svg)),
        ("/api/charts/throttling.svg", get(throttling_svg)),
        ("/api/nodes", get(nodes)),
        ("/api/jobs", get(jobs)),
        ("/api/scheduler", get(scheduler)),
        ("/api/jobs/estimates", get(estimates)),
        ("/api/segments", get(segments)),
        ("/api/placement", get(placement)),
    ]
}

/// `GET /api/targets`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct TargetsAnswer<'a> {
    targets: &'a [crate::telemetry::scrape::TargetHealth],
}

/// Health of every scrape target: last success, last error, duration, samples.
#[utoipa::path(get, path = "/api/targets", tag = "cluster",
    responses((status = 200, description = "scrape targets", body = TargetsAnswer)))]
async fn targets(State(st): State<AppState>) -> impl IntoResponse {
    let t = st.live.targets();
    Json(TargetsAnswer { targets: &t }).into_response()
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    scope: String,
    metric: String,
    since_ms: Option<i64>,
}

/// A series of the hot window: `?scope=cluster|rack:A01|node:gpu001|gpu:gpu001:3
/// &metric=power_watts|temp_celsius|sm_active_ratio|sm_clock_mhz|inlet_celsius|gpus_throttling`.
/// `GET /api/history`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct HistoryAnswer {
    scope: String,
    metric: crate::live::window::Metric,
    /// `[unix ms, value]` pairs, oldest first (`null` where nothing was read).
    points: Vec<(i64, Option<f32>)>,
}

#[utoipa::path(get, path = "/api/history", tag = "cluster", params(HistoryQuery),
    responses((status = 200, description = "the series", body = HistoryAnswer)))]
async fn history(
    State(st): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    use crate::live::window::{Metric, Scope};
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
    Ok(Json(HistoryAnswer {
        scope: q.scope,
        metric,
        points,
    })
    .into_response())
}

/// `GET /api/charts/history.svg?scope=S&metric=M`: the same series as `/api/history`, as
/// an SVG line chart (plotters), titled and labelled with units and UTC times.
#[utoipa::path(get, path = "/api/charts/history.svg", tag = "charts", params(HistoryQuery),
    responses((status = 200, description = "an SVG line chart", content_type = "image/svg+xml", body = String)))]
async fn history_svg(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HistoryQuery>,
) -> Result<Response, ApiError> {
    use crate::live::window::{Metric, Scope};
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
    Ok(svg_response(svg, &headers))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ThrottlingQuery {
    /// `cluster` or `rack:NAME`.
    scope: Option<String>,
    hours: Option<u32>,
}

/// `GET /api/charts/throttling.svg?scope=cluster&hours=24`: GPUs throttling, the most in
/// each minute, from the one-minute rollups.
#[utoipa::path(get, path = "/api/charts/throttling.svg", tag = "charts", params(ThrottlingQuery),
    responses((status = 200, description = "an SVG chart", content_type = "image/svg+xml", body = String)))]
async fn throttling_svg(
    State(st): State<AppState>,
    headers: HeaderMap,
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
    Ok(svg_response(svg, &headers))
}

/// An SVG chart as the answer: not cached, since it is drawn from live data (and in the
/// theme of the page that asked, from its cookie: an image cannot take the page's colours).
fn svg_response(svg: String, headers: &HeaderMap) -> Response {
    let svg = match super::theme::of_request(headers) {
        app::theme::Theme::Light => crate::charts::for_light_page(svg),
        app::theme::Theme::Dark => svg,
    };
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
#[utoipa::path(get, path = "/api/charts/job/{id}/activity.svg", tag = "charts",
    params(("id" = u64, Path, description = "the Slurm job id")),
    responses((status = 200, description = "an SVG chart of the job's GPUs", content_type = "image/svg+xml", body = String)))]
async fn job_activity_svg(
    State(st): State<AppState>,
    headers: HeaderMap,
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
    Ok(svg_response(svg, &headers))
}

/// `GET /api/nodes`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct NodesAnswer<'a> {
    /// The source's time of the poll, and when it was made (unix ms).
    at_ms: i64,
    polled_ms: i64,
    nodes: &'a [crate::scheduler::SchedNode],
}

/// `GET /api/jobs`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct JobsAnswer<'a> {
    at_ms: i64,
    polled_ms: i64,
    jobs: &'a [crate::scheduler::SchedJob],
    /// Why each pending job waits, by job id (a decimal string: JSON's keys are strings).
    waits: std::collections::BTreeMap<String, &'a app::queue::Wait>,
    /// Running jobs holding GPUs idle past `alerts.idle_gpu_minutes`, as of the newest
    /// readings (`at_ms` of the live overview, not of the poll).
    idle: Vec<app::queue::IdleHeld>,
}

/// `GET /api/scheduler`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct SchedulerAnswer {
    /// The newest read of the scheduler's health; none where it reports none (yet).
    health: Option<app::queue::HealthView>,
    /// Older than two reads and a second.
    stale: bool,
}

/// `GET /api/segments`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct SegmentsAnswer {
    at_ms: i64,
    polled_ms: i64,
    sets: Vec<crate::cluster::segments::BlockSet>,
    pending: Vec<crate::cluster::segments::PendingSegmentJob>,
}

/// Every node as of the last scheduler poll.
#[utoipa::path(get, path = "/api/nodes", tag = "cluster",
    responses((status = 200, description = "nodes", body = NodesAnswer)))]
async fn nodes(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    Ok(Json(NodesAnswer {
        at_ms: s.at_ms,
        polled_ms: s.polled_ms,
        nodes: &s.nodes,
    })
    .into_response())
}

/// Pending and running jobs as of the last scheduler poll.
#[utoipa::path(get, path = "/api/jobs", tag = "cluster",
    responses((status = 200, description = "jobs", body = JobsAnswer)))]
async fn jobs(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    let waits = st.live.waits();
    Ok(Json(JobsAnswer {
        at_ms: s.at_ms,
        polled_ms: s.polled_ms,
        jobs: &s.jobs,
        waits: waits.iter().map(|(id, w)| (id.to_string(), w)).collect(),
        idle: super::views::idle_of(&st.live),
    })
    .into_response())
}

/// `GET /api/jobs/estimates`: how far Slurm's start estimates were from the starts that
/// followed, per partition, over the last seven days (median and p90 of the first estimate
/// seen and of the last, and how many started later than first estimated).
#[utoipa::path(get, path = "/api/jobs/estimates", tag = "cluster",
    responses((status = 200, description = "estimates against starts", body = app::queue::EstimatesView)))]
async fn estimates(State(st): State<AppState>) -> Result<Response, ApiError> {
    let v = super::views::estimates(&st.live, &st.store)
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(v).into_response())
}

/// `GET /api/scheduler`: the scheduler's own health (slurmctld's `sdiag` or slurmrestd's
/// `/diag`, read every `slurm.diag_interval_ms`; the simulator's counters): its main and
/// backfill cycles, threads and agent queue, RPCs by type and user with Gantry's own.
#[utoipa::path(get, path = "/api/scheduler", tag = "cluster",
    responses((status = 200, description = "the scheduler's health", body = SchedulerAnswer)))]
async fn scheduler(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    let stale = s
        .health
        .as_ref()
        .is_some_and(|h| h.stale_at(crate::clock::wall_now_ms()));
    let health = s.health.as_ref().map(|h| h.view());
    Ok(Json(SchedulerAnswer { health, stale }).into_response())
}

/// `GET /api/segments`: free capacity of Slurm's block topology in the units jobs ask for
/// (`--segment`), per block and over the blocks, and the pending jobs that ask for a
/// segment size with whether a target exists for them now; as of the last scheduler poll.
#[utoipa::path(get, path = "/api/segments", tag = "cluster",
    responses((status = 200, description = "free segments", body = SegmentsAnswer)))]
async fn segments(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = st.live.sched().ok_or(ApiError::NotReady)?;
    let inv = st.live.inventory().ok_or(ApiError::NotReady)?;
    let seg = crate::cluster::segments::segments(&inv, &s.nodes, &s.jobs);
    Ok(Json(SegmentsAnswer {
        at_ms: s.at_ms,
        polled_ms: s.polled_ms,
        sets: seg.sets,
        pending: seg.pending,
    })
    .into_response())
}

/// `GET /api/placement`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct PlacementAnswer {
    at_ms: i64,
    #[serde(flatten)]
    map: crate::cluster::placement::PlacementMap,
}

/// The rack -> tray -> GPU map DCGM's platform identity fields give (chassis serial, slot,
/// tray index, host, module; exporters that print them as labels), and where the layout
/// file disagrees with it; as of the newest tick's readings. Empty where no exporter
/// prints them.
#[utoipa::path(get, path = "/api/placement", tag = "cluster",
    responses((status = 200, description = "DCGM's rack map against the layout", body = PlacementAnswer)))]
async fn placement(State(st): State<AppState>) -> Result<Response, ApiError> {
    let latest = st.live.latest().ok_or(ApiError::NotReady)?;
    let inv = st.live.inventory().ok_or(ApiError::NotReady)?;
    let r = latest.readings();
    Ok(Json(PlacementAnswer {
        at_ms: r.at_ms,
        map: crate::cluster::placement::compare(&inv, &r.places()),
    })
    .into_response())
}
