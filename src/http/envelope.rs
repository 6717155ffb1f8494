//! The outer envelope of every request: the request id (kept or generated, echoed, current
//! while the request runs), problem bodies for framework errors, and the request metrics.
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

use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use tower::{Layer, Service};

use super::layers::{problem_body, route_of};
use super::request_id;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct EnvelopeLayer {
    metrics: Arc<Metrics>,
}

impl EnvelopeLayer {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for EnvelopeLayer {
    type Service = Envelope<S>;

    fn layer(&self, inner: S) -> Envelope<S> {
        Envelope {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Envelope<S> {
    inner: S,
    metrics: Arc<Metrics>,
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

    fn call(&mut self, mut req: Request) -> EnvelopeFuture {
        let method = req.method().clone();
        let route = route_of(&req);
        let id: Arc<str> = request_id::assign(&mut req).into();
        let inner = request_id::sync_scope(id.clone(), || Box::pin(self.inner.call(req)));
        EnvelopeFuture {
            inner,
            id,
            method,
            route,
            started: Instant::now(),
            metrics: self.metrics.clone(),
        }
    }
}

pub struct EnvelopeFuture {
    inner: Inner,
    id: Arc<str>,
    method: Method,
    route: String,
    started: Instant,
    metrics: Arc<Metrics>,
}

impl Future for EnvelopeFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        let Ok(res) = std::task::ready!(request_id::sync_scope(this.id.clone(), || inner
            .as_mut()
            .poll(cx)));
        let mut res = request_id::sync_scope(this.id.clone(), || problem_body(res));
        request_id::echo(&mut res, &this.id);
        this.metrics.http.observe(
            this.method.as_str(),
            &this.route,
            res.status().as_u16(),
            this.started.elapsed(),
        );
        Poll::Ready(Ok(res))
    }
}
