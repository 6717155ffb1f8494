//! Errors as the v3 `{code, category, message, retryable}` body with a status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use sagents_plugin_api::wire::ProviderError;

#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {}: {}", .body.code, .body.message)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ProviderError,
}

impl ApiError {
    fn new(
        status: StatusCode,
        code: &str,
        category: &str,
        message: impl Into<String>,
        retryable: bool,
    ) -> Self {
        ApiError {
            status,
            body: ProviderError {
                code: code.into(),
                category: category.into(),
                message: message.into(),
                retryable,
            },
        }
    }

    pub fn invalid(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            code,
            "invalid_request",
            message,
            false,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "request.malformed",
            "invalid_request",
            message,
            false,
        )
    }

    /// A query or path the provider cannot act on (400), with a specific code.
    pub fn bad_input(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            code,
            "invalid_request",
            message,
            false,
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "auth.unauthorized",
            "unauthorized",
            "a valid bearer token is required",
            false,
        )
    }

    /// Exec without a grant.
    pub fn grant_required() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "grant.required",
            "unauthorized",
            "exec needs a grant for the sandbox: send `Authorization: Bearer <grant>`",
            false,
        )
    }

    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, "unauthorized", message, false)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            &format!("{what}.not_found"),
            "not_found",
            format!(
                "{what} `{}` does not exist",
                id.chars().take(80).collect::<String>()
            ),
            false,
        )
    }

    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, "conflict", message, false)
    }

    /// Too many at once (429); the same request later may work.
    pub fn too_many(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            code,
            "transient",
            message,
            true,
        )
    }

    /// The sandbox is running and usable; trying again later may work.
    pub fn recoverable(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code,
            "transient",
            message,
            true,
        )
    }

    /// The sandbox is broken and will not come back.
    pub fn terminal(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code,
            "sandbox_failure",
            message,
            false,
        )
    }

    /// The provider itself failed (disk, process table) before changing the sandbox.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "provider.internal",
            "internal",
            message,
            true,
        )
    }
}

const CRASHED: &str = "fault.crashed";

impl ApiError {
    /// The provider stopped mid-call as a killed one would (the `crash` fault).
    pub fn crashed(step: impl std::fmt::Display) -> Self {
        Self::internal(format!("injected crash after {step}")).with_code(CRASHED)
    }

    pub fn is_crash(&self) -> bool {
        self.body.code == CRASHED
    }

    fn with_code(mut self, code: &str) -> Self {
        self.body.code = code.into();
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}
