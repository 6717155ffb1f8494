//! The outer envelope of every request: the request id (kept or generated, echoed, current
//! while the request runs), a panic turned into a `500` problem, problem bodies for framework
//! errors, the request metrics and the request's one log line.
//!
//! A hand-written future rather than `middleware::from_fn`: a waiting long-poll holds this
//! state for its whole wait, and the generated `async` state machines of the middleware
//! machinery kept several copies of the request in it.

use std::convert::Infallible;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::layers::{panic_response, problem_body, UNMATCHED_ROUTE};
use super::request_id::{self, RequestIds};
use crate::metrics::Metrics;
use crate::telemetry::request_line::{self, RequestLine, RequestLog};

#[derive(Clone)]
pub struct EnvelopeLayer {
    shared: Arc<Shared>,
    route: Option<&'static str>,
}

struct Shared {
    metrics: Arc<Metrics>,
    ids: RequestIds,
    /// Writes the request line straight into a JSON log; without one it is a `tracing` event.
    request_log: Option<RequestLog>,
}

impl EnvelopeLayer {
    pub fn new(metrics: Arc<Metrics>, request_log: Option<RequestLog>) -> Self {
        Self {
            shared: Arc::new(Shared {
                metrics,
                ids: RequestIds::default(),
                request_log,
            }),
            route: None,
        }
    }

    /// The same envelope around a service that serves one route outside the router.
    pub fn for_route(&self, route: &'static str) -> Self {
        Self {
            shared: self.shared.clone(),
            route: Some(route),
        }
    }
}

impl<S> Layer<S> for EnvelopeLayer {
    type Service = Envelope<S>;

    fn layer(&self, inner: S) -> Envelope<S> {
        Envelope {
            inner,
            shared: self.shared.clone(),
            route: self.route,
        }
    }
}

#[derive(Clone)]
pub struct Envelope<S> {
    inner: S,
    shared: Arc<Shared>,
    route: Option<&'static str>,
}

impl<S, B> Service<Request<B>> for Envelope<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EnvelopeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> EnvelopeFuture<S::Future> {
        let method = req.method().clone();
        let route = match self.route {
            Some(route) => Route::Fixed(route),
            None => req
                .extensions()
                .get::<MatchedPath>()
                .map_or(Route::Unmatched, |m| Route::Matched(m.clone())),
        };
        let id = self.shared.ids.assign(&req);
        let inner = request_id::sync_scope(id.clone(), || {
            match panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
                Ok(inner) => Inner::Answering { inner },
                Err(panic) => Inner::Panicked {
                    res: Some(panic_response(panic)),
                },
            }
        });
        EnvelopeFuture {
            inner,
            id,
            method,
            route,
            started: Instant::now(),
            shared: self.shared.clone(),
        }
    }
}

/// The route template a request's log line and metrics name.
enum Route {
    Matched(MatchedPath),
    Fixed(&'static str),
    Unmatched,
}

pin_project! {
    pub struct EnvelopeFuture<F> {
        #[pin]
        inner: Inner<F>,
        id: Arc<str>,
        method: Method,
        route: Route,
        started: Instant,
        shared: Arc<Shared>,
    }
}

pin_project! {
    /// The inner service's answer, or the `500` of a service that panicked when called.
    #[project = InnerProj]
    enum Inner<F> {
        Answering { #[pin] inner: F },
        Panicked { res: Option<Response> },
    }
}

impl<F> Future for EnvelopeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let inner = this.inner;
        let polled = request_id::sync_scope(this.id.clone(), || match inner.project() {
            InnerProj::Answering { inner } => {
                match panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
                    Ok(polled) => polled,
                    Err(panic) => Poll::Ready(Ok(panic_response(panic))),
                }
            }
            // Taken by the poll that finished this future; another poll is a caller's bug.
            InnerProj::Panicked { res } => res.take().map_or(Poll::Pending, |r| Poll::Ready(Ok(r))),
        });
        let Ok(res) = std::task::ready!(polled);
        let latency = this.started.elapsed();
        let route = match this.route {
            Route::Matched(m) => m.as_str(),
            Route::Fixed(route) => route,
            Route::Unmatched => UNMATCHED_ROUTE,
        };
        let method = this.method.as_str();
        let mut res = request_id::sync_scope(this.id.clone(), || {
            let res = problem_body(res);
            let status = res.status().as_u16();
            let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            let latency_ms = request_line::latency_ms(latency_us);
            if res.status().is_server_error() {
                tracing::error!(
                    message = "request failed",
                    method,
                    route,
                    status,
                    latency_ms
                );
            } else if let Some(log) = &this.shared.request_log {
                if log.enabled() {
                    log.write(&RequestLine {
                        method,
                        route,
                        status,
                        latency_us,
                        request_id: this.id,
                    });
                }
            } else {
                tracing::info!(
                    target: request_line::TARGET,
                    message = request_line::MESSAGE,
                    method,
                    route,
                    status,
                    latency_ms
                );
            }
            res
        });
        request_id::echo(&mut res, this.id);
        let status = res.status().as_u16();
        this.shared
            .metrics
            .http
            .observe(method, route, status, latency);
        Poll::Ready(Ok(res))
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::{service_fn, ServiceExt};

    use super::*;

    async fn answer<S>(service: S) -> (Response, Arc<Metrics>)
    where
        S: Service<Request, Response = Response, Error = Infallible> + Send + 'static,
        S::Future: Send + 'static,
    {
        let metrics = Arc::new(Metrics::default());
        let layer = EnvelopeLayer::new(metrics.clone(), None).for_route("/boom");
        let req = Request::builder()
            .header(request_id::REQUEST_ID, "req-1")
            .body(Body::empty())
            .unwrap();
        let res = layer.layer(service).oneshot(req).await.unwrap();
        (res, metrics)
    }

    async fn assert_panic_problem((res, metrics): (Response, Arc<Metrics>)) {
        assert_eq!(res.status(), 500);
        assert_eq!(res.headers()[request_id::REQUEST_ID], "req-1");
        assert_eq!(metrics.http.requests("GET", "/boom", 500), 1);
        let body = axum::body::to_bytes(res.into_body(), 4096).await.unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["code"], "internal", "{problem}");
        assert_eq!(problem["request_id"], "req-1", "{problem}");
    }

    #[tokio::test]
    async fn a_panic_while_answering_is_a_500_problem() {
        let service = service_fn(|_req: Request| async {
            if true {
                panic!("boom");
            }
            Ok::<Response, Infallible>(Response::new(Body::empty()))
        });
        assert_panic_problem(answer(service).await).await;
    }

    #[tokio::test]
    async fn a_panic_before_answering_is_a_500_problem() {
        let service = service_fn(
            |_req: Request| -> std::future::Ready<Result<Response, Infallible>> { panic!("boom") },
        );
        assert_panic_problem(answer(service).await).await;
    }
}
