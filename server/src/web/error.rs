//! The one error envelope of the HTTP boundary: `{"error": {"status", "message"}}`.
//! Internal details (storage, scheduler, internal errors) are logged once, here, and never
//! sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The one error type at the HTTP boundary.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("no data yet: the first readings have not arrived")]
    NotReady,
    #[error("not found")]
    NotFound,
    /// Not found, saying what (a user, a session).
    #[error("{0}")]
    NoSuch(String),
    #[error("node is down: its exporter does not answer")]
    NodeDown,
    #[error("{0}")]
    BadRequest(String),
    #[error("storage unavailable")]
    Storage(#[source] crate::store::StoreError),
    #[error("sign in first")]
    Unauthenticated,
    /// A bearer token is needed (ingest): none was given, or the one `given` was refused.
    #[error("a valid ingest token is needed: Authorization: Bearer <token>")]
    NoToken { given: bool },
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// Too many for now: the message, and how many seconds to wait (`Retry-After`).
    #[error("{0}")]
    TooMany(String, u64),
    /// A request the extractors refused (a query, path, body or content type): its status
    /// (400, 413, 415, 422) and words.
    #[error("{1}")]
    Rejected(StatusCode, String),
    /// Overloaded for now; try again shortly.
    #[error("{0}")]
    Busy(String),
    /// The scheduler refused or did not answer; its words are meant for operators.
    #[error("{0}")]
    Scheduler(String),
    #[error("internal error")]
    Internal(String),
}

/// The error envelope every JSON route answers with when it refuses or fails.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// The HTTP status, repeated.
    pub status: u16,
    /// What went wrong, in words for a person (never internal details).
    pub message: String,
}

impl From<crate::actions::ActionError> for ApiError {
    fn from(e: crate::actions::ActionError) -> ApiError {
        use crate::actions::ActionError as A;
        match e {
            A::Invalid(m) => ApiError::BadRequest(m),
            A::Unknown(m) => ApiError::NoSuch(m),
            // The limit is per minute: a minute from now, the oldest action has left it.
            A::RateLimited(_) => ApiError::TooMany(e.to_string(), 60),
            A::Scheduler(s) => ApiError::Scheduler(s.to_string()),
            A::Audit(s) => ApiError::Storage(s),
            A::Stopping => ApiError::Busy(e.to_string()),
        }
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> ApiError {
        use crate::auth::AuthError as A;
        match e {
            A::BadName
            | A::ReservedName
            | A::BadPassword
            | A::BadAccount
            | A::LastAdmin
            | A::TokenExists(_) => ApiError::BadRequest(e.to_string()),
            A::UnknownUser(_) | A::UnknownSession | A::UnknownToken(_) => {
                ApiError::NoSuch(e.to_string())
            }
            A::Hash(_) | A::Random(_) => ApiError::Internal(e.to_string()),
            A::Store(s) | A::Audit(s) => ApiError::Storage(s),
        }
    }
}

impl From<crate::reports::ReportError> for ApiError {
    fn from(e: crate::reports::ReportError) -> ApiError {
        use crate::reports::ReportError as R;
        match e {
            R::Query(m) => ApiError::BadRequest(m),
            R::Store(s) => ApiError::Storage(s),
            R::Chart(m) => ApiError::Internal(format!("report chart: {m}")),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound | ApiError::NoSuch(_) => StatusCode::NOT_FOUND,
            ApiError::NodeDown => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Storage(e) => {
                // Logged once, here; the client gets no internals.
                tracing::error!(error = %e, "storage error");
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Unauthenticated | ApiError::NoToken { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooMany(..) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Rejected(status, _) => *status,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Scheduler(m) => {
                tracing::warn!(error = %m, "scheduler call failed");
                StatusCode::BAD_GATEWAY
            }
            ApiError::Internal(m) => {
                tracing::error!(error = %m, "internal error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let body = ErrorBody {
            error: ErrorDetail {
                status: status.as_u16(),
                message: self.to_string(),
            },
        };
        let mut resp = (status, Json(body)).into_response();
        let retry_after = match &self {
            ApiError::Busy(_) | ApiError::NotReady => Some(1),
            ApiError::TooMany(_, secs) => Some(*secs),
            _ => None,
        };
        if let Some(secs) = retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        if let ApiError::NoToken { given } = &self {
            // RFC 6750: say the scheme, and whether the token given was refused.
            let v = if *given {
                "Bearer realm=\"gantry-ingest\", error=\"invalid_token\""
            } else {
                "Bearer realm=\"gantry-ingest\""
            };
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(v),
            );
        }
        resp
    }
}
