//! Remediation policies: what they did and would do (operators), and an admin's run-time
//! changes (the kill switch, a rule's mode, a breaker's reset), each audited.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::JsonBody;
use super::{AppState, Routes};
use crate::alerts::remediation::{self, ChangeError};
use crate::auth::Caller;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/remediation", get(remediation_get)),
        ("/api/admin/remediation/kill_switch", post(kill_switch)),
        ("/api/admin/remediation/reset_breaker", post(reset_breaker)),
        ("/api/admin/remediation/mode", post(set_mode)),
    ]
}

impl From<ChangeError> for ApiError {
    fn from(e: ChangeError) -> ApiError {
        match e {
            ChangeError::Invalid(m) => ApiError::BadRequest(m),
            ChangeError::NotFound(m) => ApiError::NoSuch(m),
            ChangeError::Store(s) => ApiError::Storage(s),
        }
    }
}

/// The rules in force (mode, configured mode), the limits, the kill switch, open breakers,
/// executions in the last hour and the newest 500 decisions (operators and admins).
#[utoipa::path(get, path = "/api/remediation", tag = "alerts",
    responses((status = 200, description = "remediation policies", body = app::remediation::RemediationView)))]
async fn remediation_get(State(st): State<AppState>) -> Result<Response, ApiError> {
    let v = remediation::view(&st.store, &st.policies)
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(v).into_response())
}

/// An admin's change as `c`, in force at once on every replica; answers with the
/// policies as they are now.
async fn change_as(
    st: AppState,
    c: &Caller,
    change: app::remediation::RemediationChange,
    note: &str,
) -> Result<Response, ApiError> {
    let (Some(user), Some(role)) = (&c.user, c.role) else {
        return Err(ApiError::Unauthenticated);
    };
    remediation::change(&st.store, &st.policies, user, role, &change, note).await?;
    remediation_get(State(st)).await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct KillSwitchBody {
    /// On: nothing is executed (observe and recommend go on); off: executions may run.
    on: bool,
    /// Why (at most 1000 characters, no control characters).
    #[serde(default)]
    note: String,
}

/// `POST /api/admin/remediation/kill_switch` `{"on": true, "note": "…"}` (audited).
#[utoipa::path(post, path = "/api/admin/remediation/kill_switch", tag = "admin",
    request_body = KillSwitchBody,
    responses((status = 200, description = "remediation policies", body = app::remediation::RemediationView)))]
async fn kill_switch(
    State(st): State<AppState>,
    c: Caller,
    JsonBody(b): JsonBody<KillSwitchBody>,
) -> Result<Response, ApiError> {
    let change = app::remediation::RemediationChange::KillSwitch { on: b.on };
    change_as(st, &c, change, &b.note).await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct BreakerBody {
    /// The open breaker: `fleet`, `rack:B02`, `domain:leaf03`.
    domain: String,
    /// Why (at most 1000 characters, no control characters).
    #[serde(default)]
    note: String,
}

/// `POST /api/admin/remediation/reset_breaker` `{"domain": "fleet", "note": "…"}`: closes an
/// open breaker (404 if it is not open; audited).
#[utoipa::path(post, path = "/api/admin/remediation/reset_breaker", tag = "admin",
    request_body = BreakerBody,
    responses((status = 200, description = "remediation policies", body = app::remediation::RemediationView)))]
async fn reset_breaker(
    State(st): State<AppState>,
    c: Caller,
    JsonBody(b): JsonBody<BreakerBody>,
) -> Result<Response, ApiError> {
    let change = app::remediation::RemediationChange::ResetBreaker { domain: b.domain };
    change_as(st, &c, change, &b.note).await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct ModeBody {
    /// The rule's cause (404 if no rule has it).
    cause: String,
    mode: app::remediation::Mode,
    /// Why (at most 1000 characters, no control characters).
    #[serde(default)]
    note: String,
}

/// `POST /api/admin/remediation/mode` `{"cause": "xid", "mode": "execute", "note": "…"}`:
/// runs a rule in another mode from now on (audited).
#[utoipa::path(post, path = "/api/admin/remediation/mode", tag = "admin",
    request_body = ModeBody,
    responses((status = 200, description = "remediation policies", body = app::remediation::RemediationView)))]
async fn set_mode(
    State(st): State<AppState>,
    c: Caller,
    JsonBody(b): JsonBody<ModeBody>,
) -> Result<Response, ApiError> {
    let change = app::remediation::RemediationChange::Mode {
        cause: b.cause,
        mode: b.mode,
    };
    change_as(st, &c, change, &b.note).await
}
