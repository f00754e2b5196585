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
use crate::clock::wall_now_ms;
use crate::store::MAX_STORED;
use app::actions::whole;

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
        None => Err(ApiError::NoSuch(format!(
            "unknown job {id}: Gantry has not seen it in the scheduler"
        ))),
    }
}

/// Longest a checkpoint save may take: 7 days.
pub(super) const MAX_SAVE_MS: i64 = 7 * 86_400_000;
/// Longest checkpoint path, in characters (Linux's PATH_MAX is 4096 bytes).
pub(super) const MAX_PATH_CHARS: usize = 4096;
/// How far from now a reported time may be: 5 years back (a late backfill), 1 day ahead
/// (a job's clock off).
pub(super) const MAX_PAST_MS: i64 = 5 * 366 * 86_400_000;
pub(super) const MAX_AHEAD_MS: i64 = 86_400_000;

/// `v` if at most `max`, else a 400 naming the field.
fn in_range(field: &str, v: u64, max: u64) -> Result<u64, ApiError> {
    if v <= max {
        Ok(v)
    } else {
        Err(ApiError::BadRequest(format!("{field}: 0 to {max}")))
    }
}

/// A reported time (Unix ms) within 5 years before and a day after `now`, else a 400.
fn recent(field: &str, t: i64, now: i64) -> Result<i64, ApiError> {
    if (now.saturating_sub(MAX_PAST_MS)..=now.saturating_add(MAX_AHEAD_MS)).contains(&t) {
        Ok(t)
    } else {
        Err(ApiError::BadRequest(format!(
            "{field}: a Unix time in milliseconds within 5 years before and 1 day after now"
        )))
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
    // No token given: 401 whether or not ingest is on (the caller must say who it is first).
    if got.is_some()
        && st.ingest_token_sha256.is_none()
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
    Err(ApiError::NoToken {
        given: got.is_some(),
    })
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
    #[serde(deserialize_with = "whole::u64")]
    job_id: u64,
    #[serde(deserialize_with = "whole::u64")]
    step: u64,
    #[serde(deserialize_with = "whole::u64")]
    bytes: u64,
    #[serde(deserialize_with = "whole::i64")]
    duration_ms: i64,
    path: String,
    /// `complete` or `failed`.
    status: String,
    /// When the save started; default: now minus the duration.
    #[serde(default, deserialize_with = "whole::opt_i64")]
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
    if e.path.is_empty() || e.path.chars().count() > MAX_PATH_CHARS {
        return Err(ApiError::BadRequest(format!(
            "path: 1 to {MAX_PATH_CHARS} characters"
        )));
    }
    let now = wall_now_ms();
    in_range("job_id", e.job_id, MAX_STORED as u64)?;
    in_range("step", e.step, MAX_STORED as u64)?;
    in_range("bytes", e.bytes, MAX_STORED as u64)?;
    if !(0..=MAX_SAVE_MS).contains(&e.duration_ms) {
        return Err(ApiError::BadRequest(format!(
            "duration_ms: 0 to {MAX_SAVE_MS} (7 days)"
        )));
    }
    let started_ms = match e.started_ms {
        Some(t) => recent("started_ms", t, now)?,
        None => now - e.duration_ms,
    };
    job_for(&st, &scope, e.job_id).await?;
    let c = app::model::Checkpoint {
        job_id: e.job_id,
        step: Some(e.step),
        path: e.path,
        size_bytes: e.bytes,
        started_ms,
        duration_ms: e.duration_ms,
        complete,
    };
    st.store
        .put_checkpoint(&c)
        .await
        .map_err(ApiError::Storage)?;
    st.live.checkpoint_recorded(c);
    Ok((StatusCode::CREATED, Json(Recorded { recorded: true })).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct NcclEvent {
    #[serde(deserialize_with = "whole::u64")]
    job_id: u64,
    #[serde(deserialize_with = "whole::u64")]
    step: u64,
    latency_us: f64,
    #[serde(default, deserialize_with = "whole::opt_u64")]
    message_bytes: Option<u64>,
    #[serde(default, deserialize_with = "whole::opt_i64")]
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
    if !(e.latency_us.is_finite() && e.latency_us >= 0.0 && e.latency_us <= 1e9) {
        return Err(ApiError::BadRequest(
            "latency_us must be a number from 0 to 1e9".into(),
        ));
    }
    in_range("job_id", e.job_id, MAX_STORED as u64)?;
    in_range("step", e.step, MAX_STORED as u64)?;
    if let Some(b) = e.message_bytes {
        in_range("message_bytes", b, MAX_STORED as u64)?;
    }
    let now = wall_now_ms();
    let at_ms = match e.at_ms {
        Some(t) => recent("at_ms", t, now)?,
        None => now,
    };
    job_for(&st, &scope, e.job_id).await?;
    st.store
        .put_nccl(e.job_id, e.step, at_ms, e.latency_us, e.message_bytes)
        .await
        .map_err(ApiError::Storage)?;
    Ok((StatusCode::CREATED, Json(Recorded { recorded: true })).into_response())
}
