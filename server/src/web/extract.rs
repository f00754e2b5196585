//! Extractors shared by the areas: the caller the guard resolved, and a JSON body whose
//! rejection is a 400 in the one error envelope.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::auth::Caller;

/// A handler's caller, as the guard resolved it (in the request's extensions).
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = <Extension<Caller> as FromRequestParts<S>>::Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Caller, Self::Rejection> {
        Extension::<Caller>::from_request_parts(parts, state)
            .await
            .map(|Extension(c)| c)
    }
}

/// A JSON request body; one that cannot be read is `400 invalid request body: …`.
pub(super) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<JsonBody<T>, ApiError> {
        Json::<T>::from_request(req, state)
            .await
            .map(|Json(b)| JsonBody(b))
            .map_err(|e| bad_body("invalid request body", &e))
    }
}

/// A body that cannot be read, as `what: why`, with the rejection's status: 413 over the
/// size limit, 415 without `Content-Type: application/json`, else 400 (a body that parses
/// but does not fit the type too: axum says 422, the API says 400 for every bad body).
pub(super) fn bad_body(what: &str, e: &JsonRejection) -> ApiError {
    rejected(e.status(), format!("{what}: {}", e.body_text()))
}

fn rejected(status: StatusCode, message: String) -> ApiError {
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    ApiError::Rejected(status, message)
}

/// A query string; one that cannot be read is a 400 in the error envelope (axum's own
/// answers in plain text).
pub(super) struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Query<T>, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(q)| Query(q))
            .map_err(|e| rejected(e.status(), e.body_text()))
    }
}

/// Path parameters; ones that cannot be read are a 400 in the error envelope.
pub(super) struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Path<T>, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(p)| Path(p))
            .map_err(|e| rejected(e.status(), e.body_text()))
    }
}
