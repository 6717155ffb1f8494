//! The one API error type, rendered as RFC 9457 `application/problem+json`.

use std::borrow::Cow;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::ids::IdParseError;
use crate::domain::sandbox::SpecError;
use crate::domain::validate::ValidationError;
use crate::http::server::request_id;
use crate::store::StoreError;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem document. `code` is stable and meant for programs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// `urn:sagents:problem:<code>`.
    pub r#type: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code, e.g. `lease.lost`, `request.invalid`.
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The fields that were refused, when the problem is about input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldError {
    /// Path of the field in the request, e.g. `checkpoint.sequence` or `query.wait_seconds`.
    pub field: String,
    pub message: String,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: Cow<'static, str>,
    pub detail: String,
    pub errors: Vec<FieldError>,
    retry_after: Option<u32>,
    www_authenticate: bool,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        code: impl Into<Cow<'static, str>>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code: code.into(),
            detail: detail.into(),
            errors: Vec::new(),
            retry_after: None,
            www_authenticate: false,
        }
    }

    /// 422 `request.invalid` naming one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let (field, message) = (field.into(), message.into());
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "request.invalid",
            format!("{field}: {message}"),
        )
        .with_field(field, message)
    }

    pub fn with_field(mut self, field: impl Into<String>, message: impl Into<String>) -> Self {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
        self
    }

    pub fn not_found(kind: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("{kind}.not_found"),
            format!("{kind} not found"),
        )
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::UNAUTHORIZED, "auth.unauthorized", detail);
        e.www_authenticate = true;
        e
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "auth.forbidden", detail)
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service.unavailable",
            detail,
        );
        e.retry_after = Some(1);
        e
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "an internal error occurred; it has been logged",
        )
    }

    pub fn problem(&self) -> Problem {
        Problem {
            r#type: format!("urn:sagents:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_string(),
            request_id: request_id::current(),
            errors: self.errors.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut res = (self.status, body).into_response();
        let headers = res.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.www_authenticate {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The unread body makes the connection unusable: say so, or a client may reuse it.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        res
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        ApiError::invalid(e.field, e.message)
    }
}

impl From<IdParseError> for ApiError {
    fn from(e: IdParseError) -> Self {
        ApiError::not_found(e.kind)
    }
}

impl From<SpecError> for ApiError {
    fn from(e: SpecError) -> Self {
        StoreError::from(e).into()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(kind) => ApiError::not_found(kind),
            StoreError::LeaseLost => {
                ApiError::new(StatusCode::CONFLICT, "lease.lost", e.to_string())
            }
            StoreError::Conflict { code, message } => {
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
            StoreError::VersionConflict { .. } => ApiError::new(
                StatusCode::CONFLICT,
                "resource.version_conflict",
                e.to_string(),
            ),
            StoreError::SpecUnsupported(message) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "sandbox.spec_unsupported",
                message.clone(),
            )
            .with_field("sandbox_spec.spec_version", message),
            StoreError::Invalid(v) => v.into(),
            StoreError::PolicyStale(message) => {
                ApiError::new(StatusCode::CONFLICT, "sandbox.policy_stale", message)
            }
            StoreError::Unavailable(message) => {
                tracing::warn!(error = %message, "database unavailable");
                ApiError::unavailable("the database is unavailable; retry shortly")
            }
            StoreError::Database(_) | StoreError::Migrate(_) => {
                tracing::error!(error = %e, "store failure");
                ApiError::internal()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_stable_codes() {
        let cases: Vec<(StoreError, u16, &str)> = vec![
            (StoreError::NotFound("session"), 404, "session.not_found"),
            (StoreError::LeaseLost, 409, "lease.lost"),
            (
                StoreError::conflict("interaction.not_pending", "x"),
                409,
                "interaction.not_pending",
            ),
            (
                StoreError::Invalid(ValidationError::new("decision", "not allowed")),
                422,
                "request.invalid",
            ),
            (
                StoreError::PolicyStale("m".into()),
                409,
                "sandbox.policy_stale",
            ),
            (
                StoreError::Unavailable("down".into()),
                503,
                "service.unavailable",
            ),
            (
                StoreError::Database(sqlx::Error::PoolClosed),
                500,
                "internal",
            ),
        ];
        for (err, status, code) in cases {
            let api = ApiError::from(err);
            assert_eq!(api.status.as_u16(), status);
            assert_eq!(api.code, code);
        }
        let api = ApiError::from(StoreError::Invalid(ValidationError::new("decision", "no")));
        assert_eq!(api.errors[0].field, "decision");
    }

    #[test]
    fn problem_responses_carry_their_headers() {
        let res = ApiError::unauthorized("missing token").into_response();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(res.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        let res = ApiError::unavailable("db").into_response();
        assert_eq!(res.headers()[header::RETRY_AFTER], "1");
    }
}
