//! What a log line knows of the request being handled: its id, current while the request's
//! future is polled.

use std::sync::Arc;

tokio::task_local! {
    static REQUEST_ID: Arc<str>;
}

/// The id of the request handled by the current task, if any.
pub fn request_id() -> Option<Arc<str>> {
    REQUEST_ID.try_with(Arc::clone).ok()
}

/// Runs `f` with `id` as the current request id.
pub fn with_request_id<R>(id: Arc<str>, f: impl FnOnce() -> R) -> R {
    REQUEST_ID.sync_scope(id, f)
}
