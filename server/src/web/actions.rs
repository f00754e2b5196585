//! Operator actions (preview, drain, resume, requeue) through `Actions`, and the audit log
//! they write.

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::JsonBody;
use super::{AppState, Routes};
use crate::auth::Caller;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/actions/preview", post(action_preview)),
        ("/api/actions/drain", post(action_drain)),
        ("/api/actions/resume", post(action_resume)),
        ("/api/actions/requeue", post(action_requeue)),
        ("/api/audit", get(audit)),
    ]
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

async fn action_preview(
    State(st): State<AppState>,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    let kind = b.action.ok_or_else(|| {
        ApiError::BadRequest("action is required: drain, resume, requeue or requeue_hold".into())
    })?;
    Ok(Json(st.actions.preview(kind, &b.targets).await?).into_response())
}

async fn run_action(
    st: &AppState,
    caller: &Caller,
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
    c: Caller,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    run_action(&st, &c, app::actions::ActionKind::Drain, &b).await
}

async fn action_resume(
    State(st): State<AppState>,
    c: Caller,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    run_action(&st, &c, app::actions::ActionKind::Resume, &b).await
}

async fn action_requeue(
    State(st): State<AppState>,
    c: Caller,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
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
