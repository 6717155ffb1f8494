//! `x-request-id`: kept when the client sent a sane one, generated otherwise, echoed on every
//! response and available to problem bodies while the request runs.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being handled, as an extension for layers that need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

tokio::task_local! {
    static CURRENT: Arc<str>;
}

/// The id of the request handled by the current task, if any.
pub fn current() -> Option<String> {
    CURRENT.try_with(|id| id.to_string()).ok()
}

fn is_sane(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Picks the request's id (the client's when sane) and records it on the request.
pub fn assign(req: &mut Request) -> String {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_sane(v))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
    if let Ok(value) = HeaderValue::from_str(&id) {
        req.headers_mut().insert(REQUEST_ID, value);
    }
    req.extensions_mut().insert(RequestId(id.clone()));
    id
}

/// Runs `f` with `id` as the current request id.
pub fn sync_scope<R>(id: Arc<str>, f: impl FnOnce() -> R) -> R {
    CURRENT.sync_scope(id, f)
}

pub fn echo(res: &mut Response, id: &str) {
    if let Ok(value) = HeaderValue::from_str(id) {
        res.headers_mut().insert(REQUEST_ID, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_kept() {
        assert!(is_sane("abc-123_x.y:z"));
        assert!(!is_sane(""));
        assert!(!is_sane("has space"));
        assert!(!is_sane("<script>"));
        assert!(!is_sane(&"a".repeat(129)));
    }
}
