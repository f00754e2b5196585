//! Extractors shared by the areas: the caller the guard resolved, and a JSON body whose
//! rejection is a 400 in the one error envelope.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
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

/// A body that cannot be read, as `what: why`.
pub(super) fn bad_body(what: &str, e: &JsonRejection) -> ApiError {
    ApiError::BadRequest(format!("{what}: {}", e.body_text()))
}
