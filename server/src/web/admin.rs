//! Users and sessions, for admins (`/api/admin/`, [`crate::auth::Access::Admin`]): list,
//! change a role, disable, enable, delete; list sessions and revoke one. Every change is
//! `crate::auth`'s, audited before it runs; no answer carries a token or its digest.
//!
//! A change comes as JSON (tools) or as a form posted from `/admin`: a form gets a
//! redirect back to `/admin` saying what was done or why not, so the page needs no
//! JavaScript.

use axum::extract::{FromRequest, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::Path;
use super::guard::urlencode;
use super::{AppState, Routes};
use crate::auth::{Actor, Caller};
use crate::clock::wall_now_ms;

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

/// A change's body: JSON, or a browser's form (then answered with a redirect).
struct Change<T> {
    body: T,
    form: bool,
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for Change<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Change<T>, ApiError> {
        let ctype = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ctype.starts_with("application/x-www-form-urlencoded") {
            let Form(body) = Form::<T>::from_request(req, state)
                .await
                .map_err(|e| ApiError::BadRequest(format!("invalid form: {}", e.body_text())))?;
            return Ok(Change { body, form: true });
        }
        if ctype.starts_with("application/json") {
            let Json(body) = Json::<T>::from_request(req, state)
                .await
                .map_err(|e| super::extract::bad_body("invalid request body", &e))?;
            return Ok(Change { body, form: false });
        }
        // No body (a tool's bare POST): the defaults.
        Ok(Change {
            body: T::default(),
            form: false,
        })
    }
}

/// No fields.
#[derive(Default, Deserialize)]
struct Nothing {}

/// The answer to a change: JSON, or for a form a redirect to `/admin` with the outcome.
fn answer(form: bool, done: String, r: Result<ChangeAnswer, ApiError>) -> Response {
    match (form, r) {
        (false, Ok(v)) => Json(v).into_response(),
        (false, Err(e)) => e.into_response(),
        (true, Ok(_)) => Redirect::to(&format!("/admin?done={}", urlencode(&done))).into_response(),
        (true, Err(e)) => {
            // Internals are logged by the envelope and not shown; the page gets the words
            // meant for people.
            let shown = match &e {
                ApiError::Storage(_) | ApiError::Internal(_) => "storage unavailable".to_string(),
                other => other.to_string(),
            };
            // The envelope logs internals once, as for any other answer.
            let _ = e.into_response();
            Redirect::to(&format!("/admin?error={}", urlencode(&shown))).into_response()
        }
    }
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
/// `GET /api/admin/users`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct UsersAnswer {
    users: Vec<app::actions::UserInfo>,
}

/// Every user, with how many sessions each has open.
#[utoipa::path(get, path = "/api/admin/users", tag = "admin",
    responses((status = 200, description = "users", body = UsersAnswer)))]
async fn users(State(st): State<AppState>) -> Result<Json<UsersAnswer>, ApiError> {
    let users = st
        .store
        .users(wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(UsersAnswer { users }))
}

/// What a change to a user or session did (the fields that apply).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct ChangeAnswer {
    user: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<app::actions::Role>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deleted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions_ended: Option<u64>,
}

impl ChangeAnswer {
    fn of(user: &str) -> ChangeAnswer {
        ChangeAnswer {
            user: user.to_string(),
            role: None,
            disabled: None,
            deleted: None,
            id: None,
            revoked: None,
            sessions_ended: None,
        }
    }
}

#[derive(Default, Deserialize, utoipa::ToSchema)]
struct RoleBody {
    role: String,
}

/// `POST /api/admin/users/{name}/role` `{"role": "operator"}`: ends the user's sessions.
/// Changes a user's role (their sessions end). JSON, or a form from `/admin`.
#[utoipa::path(post, path = "/api/admin/users/{name}/role", tag = "admin", request_body = RoleBody,
    params(("name" = String, Path, description = "the user")),
    responses((status = 200, description = "the new role", body = ChangeAnswer)))]
async fn role(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<RoleBody>,
) -> Response {
    let done = format!("{name} is now {}; their sessions ended", b.body.role);
    let r = async {
        let role = app::actions::Role::parse(&b.body.role).ok_or_else(|| {
            ApiError::BadRequest("role is one of: viewer, operator, manager, admin".into())
        })?;
        let n = crate::auth::change_role(&st.store, &actor(&c)?, &name, role).await?;
        Ok(ChangeAnswer {
            role: Some(role),
            sessions_ended: Some(n),
            ..ChangeAnswer::of(&name)
        })
    }
    .await;
    answer(b.form, done, r)
}

/// `POST /api/admin/users/{name}/disable`: signs them out and keeps them out.
/// Disables a user (signed out everywhere; they cannot sign in).
#[utoipa::path(post, path = "/api/admin/users/{name}/disable", tag = "admin",
    params(("name" = String, Path, description = "the user")),
    responses((status = 200, description = "disabled", body = ChangeAnswer)))]
async fn disable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<Nothing>,
) -> Response {
    let r = async {
        let n = crate::auth::set_disabled(&st.store, &actor(&c)?, &name, true).await?;
        Ok(ChangeAnswer {
            disabled: Some(true),
            sessions_ended: Some(n),
            ..ChangeAnswer::of(&name)
        })
    }
    .await;
    answer(b.form, format!("{name} is disabled and signed out"), r)
}

/// `POST /api/admin/users/{name}/enable`.
/// Enables a disabled user.
#[utoipa::path(post, path = "/api/admin/users/{name}/enable", tag = "admin",
    params(("name" = String, Path, description = "the user")),
    responses((status = 200, description = "enabled", body = ChangeAnswer)))]
async fn enable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<Nothing>,
) -> Response {
    let r = async {
        crate::auth::set_disabled(&st.store, &actor(&c)?, &name, false).await?;
        Ok(ChangeAnswer {
            disabled: Some(false),
            ..ChangeAnswer::of(&name)
        })
    }
    .await;
    answer(b.form, format!("{name} is enabled"), r)
}

#[derive(Default, Deserialize, utoipa::ToSchema)]
struct DeleteBody {
    /// A form must say `yes` (its checkbox); JSON needs nothing.
    confirm: Option<String>,
}

/// `POST /api/admin/users/{name}/delete`: the user and their sessions.
/// Deletes a user (their sessions end; the last enabled admin is kept).
#[utoipa::path(post, path = "/api/admin/users/{name}/delete", tag = "admin",
    params(("name" = String, Path, description = "the user")),
    responses((status = 200, description = "deleted", body = ChangeAnswer)))]
async fn delete(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<DeleteBody>,
) -> Response {
    let r = async {
        if b.form && b.body.confirm.as_deref() != Some("yes") {
            return Err(ApiError::BadRequest(format!(
                "{name} was not deleted: tick the box to confirm"
            )));
        }
        let n = crate::auth::delete_user(&st.store, &actor(&c)?, &name).await?;
        Ok(ChangeAnswer {
            deleted: Some(true),
            sessions_ended: Some(n),
            ..ChangeAnswer::of(&name)
        })
    }
    .await;
    answer(b.form, format!("{name} is deleted"), r)
}

/// `GET /api/admin/sessions`: valid sessions by opaque id, user, created, last seen and
/// when they end.
/// `GET /api/admin/sessions`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct SessionsAnswer {
    sessions: Vec<app::actions::SessionInfo>,
}

/// Every valid session (by its random id, never its token).
#[utoipa::path(get, path = "/api/admin/sessions", tag = "admin",
    responses((status = 200, description = "sessions", body = SessionsAnswer)))]
async fn sessions(State(st): State<AppState>) -> Result<Json<SessionsAnswer>, ApiError> {
    let sessions = st
        .store
        .sessions(wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(SessionsAnswer { sessions }))
}

/// `POST /api/admin/sessions/{id}/revoke`.
/// Ends one session.
#[utoipa::path(post, path = "/api/admin/sessions/{id}/revoke", tag = "admin",
    params(("id" = String, Path, description = "the session's id")),
    responses((status = 200, description = "revoked", body = ChangeAnswer)))]
async fn revoke(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<String>,
    b: Change<Nothing>,
) -> Response {
    let mut who = String::new();
    let r = async {
        let user = crate::auth::revoke_session(&st.store, &actor(&c)?, &id).await?;
        who = user.clone();
        Ok(ChangeAnswer {
            id: Some(id.clone()),
            revoked: Some(true),
            ..ChangeAnswer::of(&user)
        })
    }
    .await;
    answer(b.form, format!("{who}'s session is revoked"), r)
}
