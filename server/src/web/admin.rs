//! Users and sessions, for admins (`/api/admin/`, [`crate::auth::Access::Admin`]): list,
//! change a role, disable, enable, delete; list sessions and revoke one. Every change is
//! `crate::auth`'s, audited before it runs; no answer carries a token or its digest.
//!
//! A change comes as JSON (tools) or as a form posted from `/admin`: a form gets a
//! redirect back to `/admin` saying what was done or why not, so the page needs no
//! JavaScript.

use axum::extract::{FromRequest, Path, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::guard::urlencode;
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
fn answer(form: bool, done: String, r: Result<Value, ApiError>) -> Response {
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
async fn users(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let users = st
        .store
        .users(wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(json!({ "users": users })))
}

#[derive(Default, Deserialize)]
struct RoleBody {
    role: String,
}

/// `POST /api/admin/users/{name}/role` `{"role": "operator"}`: ends the user's sessions.
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
        Ok(json!({ "user": name, "role": role, "sessions_ended": n }))
    }
    .await;
    answer(b.form, done, r)
}

/// `POST /api/admin/users/{name}/disable`: signs them out and keeps them out.
async fn disable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<Nothing>,
) -> Response {
    let r = async {
        let n = crate::auth::set_disabled(&st.store, &actor(&c)?, &name, true).await?;
        Ok(json!({ "user": name, "disabled": true, "sessions_ended": n }))
    }
    .await;
    answer(b.form, format!("{name} is disabled and signed out"), r)
}

/// `POST /api/admin/users/{name}/enable`.
async fn enable(
    State(st): State<AppState>,
    c: Caller,
    Path(name): Path<String>,
    b: Change<Nothing>,
) -> Response {
    let r = async {
        crate::auth::set_disabled(&st.store, &actor(&c)?, &name, false).await?;
        Ok(json!({ "user": name, "disabled": false }))
    }
    .await;
    answer(b.form, format!("{name} is enabled"), r)
}

#[derive(Default, Deserialize)]
struct DeleteBody {
    /// A form must say `yes` (its checkbox); JSON needs nothing.
    confirm: Option<String>,
}

/// `POST /api/admin/users/{name}/delete`: the user and their sessions.
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
        Ok(json!({ "user": name, "deleted": true, "sessions_ended": n }))
    }
    .await;
    answer(b.form, format!("{name} is deleted"), r)
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
    b: Change<Nothing>,
) -> Response {
    let mut who = String::new();
    let r = async {
        let user = crate::auth::revoke_session(&st.store, &actor(&c)?, &id).await?;
        who = user.clone();
        Ok(json!({ "id": id, "user": user, "revoked": true }))
    }
    .await;
    answer(b.form, format!("{who}'s session is revoked"), r)
}
