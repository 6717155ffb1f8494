//! The layers around the whole service, router and hot path alike: `Authorization`, `Cookie`
//! and `Proxy-Authorization` (and a response's `Set-Cookie`) marked sensitive, so that no
//! debug output shows them; and, only for a client that sends `Accept-Encoding`, tower-http's
//! compression with its default predicate (not an event stream, not a body under 32 bytes).
//! A request without `Accept-Encoding` skips the compression layer and its boxed body, and
//! the compressed answer's future is boxed, so that the others' (each held long-poll's) stay
//! small.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::response::Response;
use futures::future::{Either, MapOk, TryFutureExt};
use hyper::body::Incoming;
use tower::{Layer, Service};
use tower_http::compression::{
    self, Compression, CompressionBody, CompressionLayer, DefaultPredicate,
};
use tower_http::sensitive_headers::{
    SetSensitiveRequestHeaders, SetSensitiveRequestHeadersLayer, SetSensitiveResponseHeaders,
    SetSensitiveResponseHeadersLayer,
};

use super::hot_path::App;

type Marked = SetSensitiveRequestHeaders<SetSensitiveResponseHeaders<App>>;
type Compressed = Response<CompressionBody<Body>>;

/// Every request of a connection, with the layers of this module around [`App`]. The
/// compression layer wraps the service per request, by reference: a clone of `Layered` (one
/// per connection) holds the service once.
#[derive(Clone)]
pub struct Layered {
    marked: Marked,
    compression: CompressionLayer,
}

pub fn layered(app: App) -> Layered {
    let marked = SetSensitiveRequestHeadersLayer::new([
        header::AUTHORIZATION,
        header::COOKIE,
        header::PROXY_AUTHORIZATION,
    ])
    .layer(SetSensitiveResponseHeadersLayer::new([header::SET_COOKIE]).layer(app));
    Layered {
        marked,
        compression: CompressionLayer::new(),
    }
}

fn into_body(res: Compressed) -> Response {
    res.map(Body::new)
}

impl Service<Request<Incoming>> for Layered {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        <Marked as Service<Request<Incoming>>>::Future,
        Pin<
            Box<
                MapOk<
                    compression::ResponseFuture<
                        <Marked as Service<Request<Incoming>>>::Future,
                        DefaultPredicate,
                    >,
                    fn(Compressed) -> Response,
                >,
            >,
        >,
    >;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if req.headers().contains_key(header::ACCEPT_ENCODING) {
            let into_body: fn(Compressed) -> Response = into_body;
            let mut compressed: Compression<&mut Marked> = self.compression.layer(&mut self.marked);
            Either::Right(Box::pin(compressed.call(req).map_ok(into_body)))
        } else {
            Either::Left(self.marked.call(req))
        }
    }
}
