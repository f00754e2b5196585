//! Operator actions (preview, drain, resume, requeue) through `Actions`, and the audit log
//! they write.
//!
//! An action is recorded and answered at once: `202 Accepted` with `Location:
//! /api/actions/{id}` and its status (every target `pending`). `GET /api/actions/{id}`
//! follows it (`?wait=S` waits up to S seconds, at most 20, for it to move on from
//! `seen=K` ended targets). `?wait=S` (at most 20) on the action itself answers once it has ended (200,
//! or 207 when a target did not end `ok` or `already`) or after S seconds with 202.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{JsonBody, Path, Query};
use super::{AppState, Routes};
use crate::auth::Caller;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/actions/preview", post(action_preview)),
        ("/api/actions/drain", post(action_drain)),
        ("/api/actions/resume", post(action_resume)),
        ("/api/actions/requeue", post(action_requeue)),
        ("/api/actions/{id}", get(action_status)),
        ("/api/audit", get(audit)),
    ]
}

/// The body of every action: targets, plus a reason (drain) or hold (requeue).
/// An action's request: the action (for a preview), its targets, and why.
#[derive(Deserialize, utoipa::ToSchema)]
pub(super) struct ActionBody {
    /// Only for `/api/actions/preview`.
    action: Option<app::actions::ActionKind>,
    #[serde(flatten)]
    targets: app::actions::ActionTargets,
    reason: Option<String>,
    #[serde(default)]
    hold: bool,
}

/// What an action would do, without doing it (a drain on block topology says what it costs
/// in free segments).
#[utoipa::path(post, path = "/api/actions/preview", tag = "actions", request_body = ActionBody,
    responses((status = 200, description = "what the action would do", body = app::actions::Preview)))]
async fn action_preview(
    State(st): State<AppState>,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    let kind = b.action.ok_or_else(|| {
        ApiError::BadRequest("action is required: drain, resume, requeue or requeue_hold".into())
    })?;
    Ok(Json(st.actions.preview(kind, &b.targets).await?).into_response())
}

/// The longest a request waits on an action (inside the default 30 s request timeout).
const MAX_WAIT: Duration = Duration::from_secs(20);

/// How long to wait for the action to move on (seconds, at most 20), and how many of its
/// targets the caller has seen end.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct WaitQuery {
    /// Seconds to wait for the action to move on.
    wait: Option<f64>,
    /// How many targets had ended when the caller last looked.
    seen: Option<usize>,
}

impl WaitQuery {
    fn wait(&self) -> Duration {
        self.wait
            .filter(|w| w.is_finite() && *w > 0.0)
            .map_or(Duration::ZERO, |w| {
                Duration::from_secs_f64(w.min(MAX_WAIT.as_secs_f64()))
            })
    }
}

/// 202 with the URL to follow while it runs; once ended, 200, or 207 when some target did
/// not end `ok` or `already` (the body says which).
fn status_response(s: app::actions::ActionStatus) -> Response {
    if !s.finished() {
        let url = s.url.clone();
        return (StatusCode::ACCEPTED, [(header::LOCATION, url)], Json(s)).into_response();
    }
    let code = if s.all_ok() {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    (code, Json(s)).into_response()
}

async fn run_action(
    st: &AppState,
    caller: &Caller,
    kind: app::actions::ActionKind,
    b: &ActionBody,
    q: &WaitQuery,
) -> Result<Response, ApiError> {
    let started = st
        .actions
        .submit(caller, kind, &b.targets, b.reason.as_deref())
        .await?;
    let wait = q.wait();
    if wait.is_zero() {
        return Ok(status_response(started));
    }
    let now = st
        .actions
        .status(started.id, usize::MAX, wait)
        .await
        .map_err(ApiError::Storage)?
        .unwrap_or(started);
    Ok(status_response(now))
}

/// `GET /api/actions/{id}?wait=&seen=`: an action as far as it has run.
/// An action as far as it has run, waiting up to `wait` seconds for it to move on.
#[utoipa::path(get, path = "/api/actions/{id}", tag = "actions",
    params(("id" = i64, Path, description = "the action's id"), WaitQuery),
    responses((status = 200, description = "the action", body = app::actions::ActionStatus)))]
async fn action_status(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Result<Response, ApiError> {
    let id: i64 = id.parse().map_err(|_| {
        ApiError::NoSuch(format!(
            "no action {:?}",
            id.chars().take(20).collect::<String>()
        ))
    })?;
    let s = st
        .actions
        .status(id, q.seen.unwrap_or(0), q.wait())
        .await
        .map_err(ApiError::Storage)?
        .ok_or_else(|| ApiError::NoSuch(format!("no action {id}")))?;
    Ok(Json(s).into_response())
}

/// Drains nodes: recorded first, then run detached from the request, and verified.
#[utoipa::path(post, path = "/api/actions/drain", tag = "actions", request_body = ActionBody, params(WaitQuery),
    responses((status = 200, description = "finished, every target as asked", body = app::actions::ActionStatus),
        (status = 202, description = "still running (Location: its status)", body = app::actions::ActionStatus),
        (status = 207, description = "finished, some targets failed", body = app::actions::ActionStatus)))]
async fn action_drain(
    State(st): State<AppState>,
    c: Caller,
    Query(q): Query<WaitQuery>,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    run_action(&st, &c, app::actions::ActionKind::Drain, &b, &q).await
}

/// Resumes drained nodes (recorded, run detached, verified).
#[utoipa::path(post, path = "/api/actions/resume", tag = "actions", request_body = ActionBody, params(WaitQuery),
    responses((status = 200, description = "finished", body = app::actions::ActionStatus),
        (status = 202, description = "still running", body = app::actions::ActionStatus),
        (status = 207, description = "some targets failed", body = app::actions::ActionStatus)))]
async fn action_resume(
    State(st): State<AppState>,
    c: Caller,
    Query(q): Query<WaitQuery>,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    run_action(&st, &c, app::actions::ActionKind::Resume, &b, &q).await
}

/// Requeues jobs (recorded, run detached, verified).
#[utoipa::path(post, path = "/api/actions/requeue", tag = "actions", request_body = ActionBody, params(WaitQuery),
    responses((status = 200, description = "finished", body = app::actions::ActionStatus),
        (status = 202, description = "still running", body = app::actions::ActionStatus),
        (status = 207, description = "some targets failed", body = app::actions::ActionStatus)))]
async fn action_requeue(
    State(st): State<AppState>,
    c: Caller,
    Query(q): Query<WaitQuery>,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    let kind = if b.hold {
        app::actions::ActionKind::RequeueHold
    } else {
        app::actions::ActionKind::Requeue
    };
    run_action(&st, &c, kind, &b, &q).await
}

/// `GET /api/audit` as JSON.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct AuditAnswer {
    entries: Vec<app::actions::AuditEntry>,
}

/// The audit query: each field its own (a `flatten`ed filter would take every value as a
/// string, so `limit=5` could never be read).
#[derive(Deserialize)]
struct AuditQuery {
    user: Option<String>,
    action: Option<String>,
    target: Option<String>,
    limit: Option<u32>,
    format: Option<String>,
}

/// `GET /api/audit?user=&action=&target=&limit=&format=csv`.
/// The audit log, newest first (`format=csv` for a download).
#[utoipa::path(get, path = "/api/audit", tag = "actions",
    params(("user" = Option<String>, Query, description = "only this user's"),
        ("action" = Option<String>, Query, description = "only this action"),
        ("target" = Option<String>, Query, description = "only actions on this node or job"),
        ("limit" = Option<u32>, Query, description = "at most this many"),
        ("format" = Option<String>, Query, description = "`json` (default) or `csv` for a download")),
    responses((status = 200, description = "audit entries, or CSV with format=csv",
        content((AuditAnswer = "application/json"), (String = "text/csv")))))]
async fn audit(
    State(st): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<Response, ApiError> {
    let csv = match q.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "unknown format {other:?}: json or csv"
            )))
        }
    };
    let filter = app::actions::AuditFilter {
        user: q.user,
        action: q.action,
        target: q.target,
        limit: q.limit,
    };
    let rows = st.store.audit(&filter).await.map_err(ApiError::Storage)?;
    if csv {
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
        return Ok(super::download(super::CSV, "gantry-audit.csv", out));
    }
    Ok(Json(AuditAnswer { entries: rows }).into_response())
}
