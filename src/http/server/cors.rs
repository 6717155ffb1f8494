//! CORS for browser clients on the origins `SAGENTS_CORS_ORIGINS` names: tower-http's
//! `CorsLayer`, given only the requests whose `Origin` is one of them. Any other request
//! (no `Origin`, an origin not listed, every request when none is configured) goes on as if
//! there were no CORS at all: no CORS headers, and an `OPTIONS` is the router's `405`. A CORS
//! request's future is boxed, so that every other request's (each held long-poll's) stays small.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{header, HeaderName, HeaderValue, Method, Request, Response};
use futures::future::Either;
use tower::{Layer, Service};
use tower_http::cors::{self, AllowOrigin, Cors, CorsLayer};

use super::request_id::REQUEST_ID;
use crate::config::Config;

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

#[derive(Clone)]
pub struct CorsGateLayer {
    cors: Option<(CorsLayer, Arc<[HeaderValue]>)>,
}

impl CorsGateLayer {
    pub fn new(config: &Config) -> Self {
        let origins: Arc<[HeaderValue]> = config
            .cors_origins
            .iter()
            .filter(|o| !o.is_empty())
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        if origins.is_empty() {
            return Self { cors: None };
        }
        let layer = CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([
                Method::GET,
                Method::HEAD,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                IDEMPOTENCY_KEY,
                header::IF_NONE_MATCH,
                LAST_EVENT_ID,
                REQUEST_ID,
            ])
            .expose_headers([header::ETAG, header::RETRY_AFTER, REQUEST_ID]);
        Self {
            cors: Some((layer, origins)),
        }
    }
}

impl<S: Clone> Layer<S> for CorsGateLayer {
    type Service = CorsGate<S>;

    fn layer(&self, inner: S) -> CorsGate<S> {
        CorsGate {
            cors: self
                .cors
                .as_ref()
                .map(|(layer, origins)| (layer.layer(inner.clone()), origins.clone())),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct CorsGate<S> {
    inner: S,
    cors: Option<(Cors<S>, Arc<[HeaderValue]>)>,
}

impl<S, B, R> Service<Request<B>> for CorsGate<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Either<Pin<Box<cors::ResponseFuture<S::Future>>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some((cors, _)) = &mut self.cors {
            std::task::ready!(cors.poll_ready(cx))?;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match &mut self.cors {
            Some((cors, origins))
                if req
                    .headers()
                    .get(header::ORIGIN)
                    .is_some_and(|o| origins.contains(o)) =>
            {
                Either::Left(Box::pin(cors.call(req)))
            }
            _ => Either::Right(self.inner.call(req)),
        }
    }
}
