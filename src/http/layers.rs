//! Cross-cutting layers: tracing spans, panics and non-problem error bodies.

use std::any::Any;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::{MakeSpan, OnFailure, OnResponse};
use tracing::Span;

use super::error::{ApiError, PROBLEM_JSON};
use super::request_id::RequestId;

pub const UNMATCHED_ROUTE: &str = "unmatched";

pub(super) fn route_of<B>(req: &axum::http::Request<B>) -> String {
    req.extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| UNMATCHED_ROUTE.to_owned())
}

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

/// The span of one request (method, route, request id: the context of every line logged
/// while it runs) and its one log line at the end, with status and latency. Fields are
/// borrowed, never copied, and the span is never updated: each update formats its fields
/// again.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &axum::http::Request<B>) -> Span {
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map_or(UNMATCHED_ROUTE, MatchedPath::as_str);
        let request_id = req
            .extensions()
            .get::<RequestId>()
            .map_or("", |r| r.0.as_str());
        tracing::info_span!("request", method = req.method().as_str(), route, request_id,)
    }
}

impl<B> OnResponse<B> for RequestSpan {
    fn on_response(self, res: &axum::http::Response<B>, latency: std::time::Duration, _: &Span) {
        let status = res.status().as_u16();
        let latency_ms = latency.as_secs_f64() * 1000.0;
        if res.status().is_server_error() {
            tracing::error!(status, latency_ms, "request failed");
        } else {
            tracing::info!(status, latency_ms, "request finished");
        }
    }
}

impl OnFailure<ServerErrorsFailureClass> for RequestSpan {
    fn on_failure(&mut self, _: ServerErrorsFailureClass, _: std::time::Duration, _: &Span) {}
}
