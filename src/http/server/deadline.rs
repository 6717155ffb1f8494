//! How long a request that changes something may take to be answered: tower-http's
//! `Timeout` around every `POST`, `PUT`, `PATCH` and `DELETE` (the requests that call a
//! provider or write), `SAGENTS_REQUEST_TIMEOUT_SECONDS`; a claim, whose long-poll wait is in
//! its body, has the longest long-poll on top. Past it the handler is dropped and the answer is
//! a `504`, which the envelope turns into the `request.timeout` problem. A `GET` or `HEAD`
//! gets no timer: it only reads, bounded by the database pool's acquire timeout, and a timer
//! in each snapshot poll and held long-poll cost 7 % of the snapshot `304`'s throughput and
//! 1.4 KB per waiting long-poll (`scripts/bench-http`). The timed future is boxed, so an
//! untimed request's future does not grow by it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{Method, Request, Response, StatusCode};
use futures::future::Either;
use tower::{Layer, Service};
use tower_http::timeout::Timeout;

use crate::config::Config;

/// The status of an answer cut off by its bound; nothing else in the service answers it.
pub const TIMED_OUT: StatusCode = StatusCode::GATEWAY_TIMEOUT;
/// The one long-poll that changes something; its wait is in its body.
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
    type Future = Either<S::Future, Pin<Box<<Timeout<S> as Service<Request<B>>>::Future>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if matches!(*req.method(), Method::GET | Method::HEAD) {
            return Either::Left(self.inner.call(req));
        }
        let bound = if req.uri().path() == CLAIMS {
            self.bounds.long_poll
        } else {
            self.bounds.ordinary
        };
        let timed = Timeout::with_status_code(&mut self.inner, TIMED_OUT, bound).call(req);
        Either::Right(Box::pin(timed))
    }
}
