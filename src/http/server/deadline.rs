//! How long a request may take to be answered: tower-http's `Timeout`, with the bound chosen
//! per request. An ordinary request has `SAGENTS_REQUEST_TIMEOUT_SECONDS`; one that may
//! long-poll (`wait_seconds` in the query, or a claim, whose wait is in its body) has the
//! longest long-poll on top. Past it the handler is dropped and the answer is a `504`, which
//! the envelope turns into the `request.timeout` problem. An event stream is never cut: the
//! bound covers the response head, not the body streamed after it.

use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{Request, Response, StatusCode};
use tower::{Layer, Service};
use tower_http::timeout::Timeout;

use crate::config::Config;

/// The status of an answer cut off by its bound; nothing else in the service answers it.
pub const TIMED_OUT: StatusCode = StatusCode::GATEWAY_TIMEOUT;
/// The one long-poll whose wait is in its body.
const CLAIMS: &str = "/v1/runtime/claims";

#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    ordinary: Duration,
    long_poll: Duration,
}

impl DeadlineLayer {
    pub fn new(config: &Config) -> Self {
        Self {
            ordinary: config.request_timeout(),
            long_poll: config.request_timeout() + config.long_poll_max(),
        }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            bounds: *self,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    bounds: DeadlineLayer,
}

impl<S, B, R> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = <Timeout<S> as Service<Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let bound = if may_long_poll(&req) {
            self.bounds.long_poll
        } else {
            self.bounds.ordinary
        };
        Timeout::with_status_code(&mut self.inner, TIMED_OUT, bound).call(req)
    }
}

fn may_long_poll<B>(req: &Request<B>) -> bool {
    req.uri().path() == CLAIMS
        || req.uri().query().is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes()).any(|(key, _)| key == "wait_seconds")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> Request<()> {
        Request::get(uri).body(()).unwrap()
    }

    #[test]
    fn long_polls_are_told_apart_by_their_wait() {
        assert!(may_long_poll(&get(
            "/v1/sessions/x/snapshot?wait_seconds=30"
        )));
        assert!(may_long_poll(&get(
            "/v1/interactions?limit=5&wait%5Fseconds=1"
        )));
        assert!(may_long_poll(&get(CLAIMS)));
        assert!(!may_long_poll(&get("/v1/sessions/x/snapshot")));
        assert!(!may_long_poll(&get("/v1/interactions?cursor=wait_seconds")));
    }
}
