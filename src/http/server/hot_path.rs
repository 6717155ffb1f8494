//! The snapshot read, which every open frontend polls, served beside the router.
//!
//! For each request axum's router matches the path, percent-decodes and stores its
//! parameters, records the matched route and clones the route's layered service: more than a
//! tenth of a `304`'s CPU. Here the path is matched by hand and the request goes through the
//! same envelope, CORS and timeout into the handler's own code. Whatever this match is
//! unsure of (a `HEAD`, an empty or percent-encoded id, any other path) goes to the router.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use axum::Router;
use futures::future::{BoxFuture, Either};
use hyper::body::Incoming;
use tower::{Layer, Service};

use super::cors::{CorsGate, CorsGateLayer};
use super::deadline::{Deadline, DeadlineLayer};
use super::envelope::{Envelope, EnvelopeFuture, EnvelopeLayer};
use crate::http::api::sessions::get_snapshot_direct;
use crate::http::api::state::AppState;

pub const SNAPSHOT_ROUTE: &str = "/v1/sessions/{session_id}/snapshot";

/// Every request of a connection: the snapshot read straight to its handler, the rest to the
/// router. Both are always ready.
#[derive(Clone)]
pub struct App {
    router: Router,
    snapshot: Envelope<CorsGate<Deadline<Snapshot>>>,
}

/// The layers of the router's routes that the snapshot read goes through too.
#[derive(Clone)]
pub struct RouteLayers {
    pub envelope: EnvelopeLayer,
    pub cors: CorsGateLayer,
    pub deadline: DeadlineLayer,
}

/// `router` with the snapshot read beside it, in the same layers as the router's routes.
pub fn app(state: AppState, router: Router, layers: &RouteLayers) -> App {
    // The router's stack without the body limit and `Idempotency-Key`: a GET reads no body.
    let snapshot = layers
        .envelope
        .for_route(SNAPSHOT_ROUTE)
        .layer(layers.cors.layer(layers.deadline.layer(Snapshot { state })));
    App { router, snapshot }
}

type SnapshotAnswer = <CorsGate<Deadline<Snapshot>> as Service<Request<Incoming>>>::Future;

impl Service<Request<Incoming>> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<EnvelopeFuture<SnapshotAnswer>, RouteFuture<Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if req.method() == Method::GET && snapshot_session(req.uri().path()).is_some() {
            Either::Left(self.snapshot.call(req))
        } else {
            Either::Right(self.router.call(req))
        }
    }
}

/// The session id of a snapshot path that needs no decoding, else `None`.
fn snapshot_session(path: &str) -> Option<&str> {
    let id = path
        .strip_prefix("/v1/sessions/")?
        .strip_suffix("/snapshot")?;
    let plain = !id.is_empty() && !id.bytes().any(|b| b == b'/' || b == b'%');
    plain.then_some(id)
}

type SnapshotFuture = BoxFuture<'static, Result<Response, Infallible>>;

#[derive(Clone)]
/// The snapshot handler as a service.
pub struct Snapshot {
    state: AppState,
}

impl Service<Request<Incoming>> for Snapshot {
    type Response = Response;
    type Error = Infallible;
    type Future = SnapshotFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let state = self.state.clone();
        let (parts, _) = req.into_parts();
        // `App` sends only matched paths here; any other would be an id that names nothing.
        let session = snapshot_session(parts.uri.path())
            .unwrap_or_default()
            .parse();
        Box::pin(async move {
            Ok(get_snapshot_direct(state, session, parts)
                .await
                .into_response())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::snapshot_session;

    #[test]
    fn only_plain_snapshot_paths_are_matched() {
        let id = "ses_01a23a9298147018b06ff98f3fca44d0";
        assert_eq!(
            snapshot_session(&format!("/v1/sessions/{id}/snapshot")),
            Some(id)
        );
        for path in [
            "/v1/sessions//snapshot",
            "/v1/sessions/a/b/snapshot",
            "/v1/sessions/ses_%30/snapshot",
            "/v1/sessions/x/snapshot/",
            "/v1/sessions/x/events",
            "/v1/sessions/snapshot",
            "/v2/sessions/x/snapshot",
        ] {
            assert_eq!(snapshot_session(path), None, "{path}");
        }
    }
}
