//! The outer envelope of every request: the request id (kept or generated, echoed, current
//! while the request runs), problem bodies for framework errors, the request metrics and the
//! request's one log line.
//!
//! A hand-written future rather than `middleware::from_fn`: a waiting long-poll holds this
//! state for its whole wait, and the generated `async` state machines of the middleware
//! machinery kept several copies of the request in it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use tower::{Layer, Service};

use super::layers::{problem_body, UNMATCHED_ROUTE};
use super::request_id::{self, RequestIds};
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct EnvelopeLayer {
    shared: Arc<Shared>,
    route: Option<&'static str>,
}

struct Shared {
    metrics: Arc<Metrics>,
    ids: RequestIds,
}

impl EnvelopeLayer {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            shared: Arc::new(Shared {
                metrics,
                ids: RequestIds::default(),
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

type Inner = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> Service<Request> for Envelope<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EnvelopeFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> EnvelopeFuture {
        let method = req.method().clone();
        let route = match self.route {
            Some(route) => Route::Fixed(route),
            None => req
                .extensions()
                .get::<MatchedPath>()
                .map_or(Route::Unmatched, |m| Route::Matched(m.clone())),
        };
        let id = self.shared.ids.assign(&req);
        let inner = request_id::sync_scope(id.clone(), || Box::pin(self.inner.call(req)));
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

pub struct EnvelopeFuture {
    inner: Inner,
    id: Arc<str>,
    method: Method,
    route: Route,
    started: Instant,
    shared: Arc<Shared>,
}

impl Future for EnvelopeFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        let Ok(res) = std::task::ready!(request_id::sync_scope(this.id.clone(), || inner
            .as_mut()
            .poll(cx)));
        let latency = this.started.elapsed();
        let route = match &this.route {
            Route::Matched(m) => m.as_str(),
            Route::Fixed(route) => route,
            Route::Unmatched => UNMATCHED_ROUTE,
        };
        let method = this.method.as_str();
        let mut res = request_id::sync_scope(this.id.clone(), || {
            let res = problem_body(res);
            let status = res.status().as_u16();
            let latency_ms = latency.as_secs_f64() * 1000.0;
            if res.status().is_server_error() {
                tracing::error!(method, route, status, latency_ms, "request failed");
            } else {
                tracing::info!(method, route, status, latency_ms, "request finished");
            }
            res
        });
        request_id::echo(&mut res, &this.id);
        let status = res.status().as_u16();
        this.shared
            .metrics
            .http
            .observe(method, route, status, latency);
        Poll::Ready(Ok(res))
    }
}
