//! Users and sessions, for admins (`/api/admin/`, [`crate::auth::Access::Admin`]): list,
//! change a role, disable, enable, delete; list sessions and revoke one. Every change is
//! `crate::auth`'s, audited before it runs; no answer carries a token or its digest.

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::extract::JsonBody;
use super::{AppState, Routes};
use crate::auth::{Actor, Caller};
use crate::live::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/admin/users", get(users)),
        ("/api/admin/users/{name}/role", post(role)),
        ("/api/admin/users/{name}/disable", post(disable)),
        ("/api/admin/users/{name}/enable", post(enable)),
        ("/api/admin/users/{name}/delete", post(delete)),
        ("/api/admin/sessions", get(sessions)),
        ("/api/admin/sessions/{id}/revoke", post(revoke)),
    ]
}

/// The admin the guard let through, as the audit log names them.
fn actor(c: &Caller) -> Result<Actor, ApiError> {
    match (&c.user, c.role) {
        (Some(user), Some(role)) => Ok(Actor {
            user: user.clone(),
            role,
        }),
        _ => Err(ApiError::Unauthenticated),
    }
}

/// `GET /api/admin/users`: every user with role, disabled, created, and valid sessions.
async fn users(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let users = st
        .store
        .users(wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(json!({ "users": users })))
}

#[derive(Deserialize)]
struct RoleBody {
    role: String,
}

/// `POST /api/admin/users/{name}/role` `{"role": "operator"}`: ends the user's sessions.
async fn role(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    JsonBody(b): JsonBody<RoleBody>,
) -> Result<Json<Value>, ApiError> {
    let role = app::actions::Role::parse(&b.role).ok_or_else(|| {
        ApiError::BadRequest("role is one of: viewer, operator, manager, admin".into())
    })?;
    let n = crate::auth::change_role(&st.store, &actor(&c)?, &name, role).await?;
    Ok(Json(
        json!({ "user": name, "role": role, "sessions_ended": n }),
    ))
}

/// `POST /api/admin/users/{name}/disable`: signs them out and keeps them out.
async fn disable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let n = crate::auth::set_disabled(&st.store, &actor(&c)?, &name, true).await?;
    Ok(Json(
        json!({ "user": name, "disabled": true, "sessions_ended": n }),
    ))
}

/// `POST /api/admin/users/{name}/enable`.
async fn enable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    crate::auth::set_disabled(&st.store, &actor(&c)?, &name, false).await?;
    Ok(Json(json!({ "user": name, "disabled": false })))
}

/// `POST /api/admin/users/{name}/delete`: the user and their sessions.
async fn delete(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let n = crate::auth::delete_user(&st.store, &actor(&c)?, &name).await?;
    Ok(Json(
        json!({ "user": name, "deleted": true, "sessions_ended": n }),
    ))
}

/// `GET /api/admin/sessions`: valid sessions by opaque id, user, created, last seen and
/// when they end.
async fn sessions(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let sessions = st
        .store
        .sessions(wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(json!({ "sessions": sessions })))
}

/// `POST /api/admin/sessions/{id}/revoke`.
async fn revoke(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let user = crate::auth::revoke_session(&st.store, &actor(&c)?, &id).await?;
    Ok(Json(json!({ "id": id, "user": user, "revoked": true })))
}
