//! Cross-cutting layers: panics and non-problem error bodies.

use std::any::Any;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::http::api::error::{ApiError, PROBLEM_JSON};

pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Gives an error response that is not already a problem (405 from the router, a framework
/// rejection) a problem body with a stable code.
pub(super) fn problem_body(res: Response) -> Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return res;
    }
    let (code, detail) = match status {
        StatusCode::NOT_FOUND => ("route.not_found", "no such resource"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "request.method_not_allowed",
            "this method is not allowed on this resource",
        ),
        super::deadline::TIMED_OUT => (
            "request.timeout",
            "the request was not answered in time; it may be retried",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ("request.too_large", "the request body is too large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "request.unsupported_media_type",
            "this content type is not supported",
        ),
        s if s.is_server_error() => ("internal", "an internal error occurred; it has been logged"),
        _ => ("request.bad", "the request could not be processed"),
    };
    let (mut parts, _) = res.into_parts();
    let problem = ApiError::new(status, code, detail).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    Response::from_parts(parts, problem.into_body())
}

pub async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "route.not_found", "no such resource")
}

/// A panic is a bug; the client still gets a problem, never a dropped connection.
pub fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response<Body> {
    let message = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = message, "request handler panicked");
    ApiError::internal().into_response()
}
