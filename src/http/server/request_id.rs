//! `x-request-id`: kept when the client sent a sane one, generated otherwise, echoed on every
//! response and available to problem bodies while the request runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue, Request};
use axum::response::Response;

use crate::telemetry::context;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request handled by the current task, if any.
pub fn current() -> Option<String> {
    context::request_id().map(|id| id.to_string())
}

/// Makes request ids without a system call: a random prefix per process and a counter,
/// 32 hex digits in all.
#[derive(Debug)]
pub struct RequestIds {
    prefix: u64,
    next: AtomicU64,
}

impl Default for RequestIds {
    fn default() -> Self {
        Self {
            prefix: rand::random(),
            next: AtomicU64::new(0),
        }
    }
}

impl RequestIds {
    fn make(&self) -> Arc<str> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut digits = [0u8; 32];
        let (prefix, counter) = digits.split_at_mut(16);
        hex::encode_to_slice(self.prefix.to_be_bytes(), prefix).expect("16 digits hold 8 bytes");
        hex::encode_to_slice(n.to_be_bytes(), counter).expect("16 digits hold 8 bytes");
        Arc::from(std::str::from_utf8(&digits).expect("hex digits are ASCII"))
    }

    /// The request's id: the client's when it sent a sane one, else a new one.
    pub fn assign<B>(&self, req: &Request<B>) -> Arc<str> {
        req.headers()
            .get(&REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| is_sane(v))
            .map_or_else(|| self.make(), Arc::from)
    }
}

fn is_sane(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Runs `f` with `id` as the current request id.
pub fn sync_scope<R>(id: Arc<str>, f: impl FnOnce() -> R) -> R {
    context::with_request_id(id, f)
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

    #[test]
    fn made_ids_are_distinct_sane_and_share_the_process_prefix() {
        let ids = RequestIds::default();
        let req = Request::new(axum::body::Body::empty());
        let (a, b) = (ids.assign(&req), ids.assign(&req));
        assert_ne!(a, b);
        assert!(is_sane(&a) && a.len() == 32, "{a}");
        assert_eq!(a[..16], b[..16]);
    }
}
