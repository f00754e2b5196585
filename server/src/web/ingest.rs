//! What training jobs report with an ingest token: checkpoint saves and NCCL latencies,
//! for jobs Gantry knows (of the token's account, for a token scoped to one).

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::bad_body;
use super::{AppState, Routes};
use crate::auth::IngestScope;
use crate::live::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/ingest/checkpoint", post(ingest_checkpoint)),
        ("/api/ingest/nccl", post(ingest_nccl)),
    ]
}

/// The account of a job the scheduler lists now, or of one in the job history.
async fn known_job(st: &AppState, id: u64) -> Result<String, ApiError> {
    let now = st.live.sched().and_then(|s| {
        s.jobs
            .iter()
            .find(|j| j.job.id == id)
            .map(|j| j.job.account.clone())
    });
    if let Some(account) = now {
        return Ok(account);
    }
    match st.store.job(id).await.map_err(ApiError::Storage)? {
        Some(j) => Ok(j.account),
        None => Err(ApiError::BadRequest(format!(
            "unknown job {id}: Gantry has not seen it in the scheduler"
        ))),
    }
}

/// Longest bearer token read.
const MAX_TOKEN: usize = 512;

/// The ingest token check: a bearer token, either the `ingest_token` setting (any
/// account) or a named token not revoked (`gantry token add`, maybe for one account).
async fn ingest_allowed(st: &AppState, headers: &HeaderMap) -> Result<IngestScope, ApiError> {
    use sha2::{Digest, Sha256};
    let got = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN);
    if let Some(got) = got {
        let digest: [u8; 32] = Sha256::digest(got.as_bytes()).into();
        if st.ingest_token_sha256 == Some(digest) {
            return Ok(IngestScope::AnyAccount);
        }
        let named = st
            .store
            .use_ingest_token(&hex::encode(digest), wall_now_ms())
            .await
            .map_err(ApiError::Storage)?;
        if let Some(t) = named {
            return Ok(IngestScope::of(&t));
        }
    }
    if st.ingest_token_sha256.is_none()
        && !st
            .store
            .has_ingest_tokens()
            .await
            .map_err(ApiError::Storage)?
    {
        return Err(ApiError::Forbidden(
            "ingest is off: set ingest_token or add one with gantry token add",
        ));
    }
    Err(ApiError::Unauthenticated)
}

/// A job this token may write for: known, and of its account when it has one.
async fn job_for(st: &AppState, scope: &IngestScope, id: u64) -> Result<(), ApiError> {
    let account = known_job(st, id).await?;
    if scope.allows(&account) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "this ingest token writes only for jobs of its own account",
        ))
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
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

/// What an ingest call answers.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct Recorded {
    recorded: bool,
}

/// `POST /api/ingest/checkpoint`: a training job reports a checkpoint save.
#[utoipa::path(post, path = "/api/ingest/checkpoint", tag = "ingest", request_body = CheckpointEvent,
    security(("ingest_token" = [])),
    responses((status = 201, description = "recorded", body = Recorded)))]
async fn ingest_checkpoint(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<CheckpointEvent>, JsonRejection>,
) -> Result<Response, ApiError> {
    let scope = ingest_allowed(&st, &headers).await?;
    let Json(e) = body.map_err(|e| bad_body("invalid checkpoint event", &e))?;
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
    job_for(&st, &scope, e.job_id).await?;
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
    Ok((StatusCode::CREATED, Json(Recorded { recorded: true })).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct NcclEvent {
    job_id: u64,
    step: u64,
    latency_us: f64,
    message_bytes: Option<u64>,
    at_ms: Option<i64>,
}

/// `POST /api/ingest/nccl`: one step's all-reduce latency.
#[utoipa::path(post, path = "/api/ingest/nccl", tag = "ingest", request_body = NcclEvent,
    security(("ingest_token" = [])),
    responses((status = 201, description = "recorded", body = Recorded)))]
async fn ingest_nccl(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<NcclEvent>, JsonRejection>,
) -> Result<Response, ApiError> {
    let scope = ingest_allowed(&st, &headers).await?;
    let Json(e) = body.map_err(|e| bad_body("invalid NCCL sample", &e))?;
    if !(e.latency_us.is_finite() && e.latency_us >= 0.0 && e.latency_us < 1e9) {
        return Err(ApiError::BadRequest(
            "latency_us must be a number from 0 to 1e9".into(),
        ));
    }
    job_for(&st, &scope, e.job_id).await?;
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
    Ok((StatusCode::CREATED, Json(Recorded { recorded: true })).into_response())
}
