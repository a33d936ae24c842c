//! The one error type of the API: a status and a short message. Internals
//! are logged, never shown to clients (axum `examples/error-handling`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    BadRequest(String),
    /// No or wrong bearer token.
    Unauthorized(String),
    /// Changes are disabled (no token configured).
    Forbidden(String),
    /// The pipeline cannot take the request now.
    Unavailable(String),
    /// Understood but refused (e.g. a model artifact of another schema).
    Unprocessable(String),
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, msg) = match self {
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
            ApiError::Unprocessable(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
            ApiError::Internal(m) => {
                tracing::error!(error = %m, "internal error serving a request");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error".to_string(),
                )
            }
        };
        (status, Json(serde_json::json!({ "error": msg }))).into_response()
    }
}

impl From<crate::risk_table::Poisoned> for ApiError {
    fn from(e: crate::risk_table::Poisoned) -> Self {
        ApiError::Internal(e.to_string())
    }
}
