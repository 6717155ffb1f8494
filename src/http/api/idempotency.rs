//! `Idempotency-Key` on POST: the first request runs, a replay gets the stored response.
//!
//! Entries are scoped by the caller's token id and keyed by a hash of method, path, query
//! and body bytes. The stored body is prefixed with the response's content type and a
//! newline, so a replay is byte-for-byte the first answer.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use tower::{Layer, Service, ServiceExt};

use super::auth;
use super::error::ApiError;
use super::extract::read_body;
use super::state::AppState;
use crate::store::{stored_answer, IdempotencyBegin, IdempotencyClaim, Store};

pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Set on a response whose replay must not repeat it (it carries a secret): the layer
/// stores this answer for replays instead of the response itself.
#[derive(Debug, Clone)]
pub struct ReplayWith {
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
}

impl ReplayWith {
    /// `value` as JSON with `status`: the answer stripped of what a replay must not repeat.
    pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default().into(),
        }
    }

    /// The status and the answer as the store keeps it under a key.
    pub fn stored(&self) -> (u16, Vec<u8>) {
        (
            self.status.as_u16(),
            stored_answer(self.content_type, &self.body),
        )
    }

    pub fn problem(error: &ApiError) -> Self {
        Self {
            status: error.status,
            content_type: super::error::PROBLEM_JSON,
            body: serde_json::to_vec(&error.problem())
                .unwrap_or_default()
                .into(),
        }
    }
}

/// Wraps every route: a POST with an `Idempotency-Key` runs through [`handle`]; any other
/// request goes straight to the route, with no state of this layer's.
#[derive(Clone)]
pub struct IdempotencyLayer {
    state: AppState,
}

impl IdempotencyLayer {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Idempotency<S> {
        Idempotency {
            inner,
            state: self.state.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    state: AppState,
}

type Keyed = BoxFuture<'static, Result<Response, Infallible>>;

impl<S> Service<Request> for Idempotency<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, Keyed>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if req.method() != Method::POST || !req.headers().contains_key(&IDEMPOTENCY_KEY) {
            return Either::Left(self.inner.call(req));
        }
        // The clone is the one that was not made ready: the ready one runs this request.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let state = self.state.clone();
        Either::Right(Box::pin(async move {
            match handle(state, req, ready).await {
                Ok(res) | Err(res) => Ok(res),
            }
        }))
    }
}

async fn handle<S>(state: AppState, req: Request, route: S) -> Result<Response, Response>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let principal = auth::authenticate(req.headers(), &state)
        .await
        .map_err(IntoResponse::into_response)?;
    let key =
        parse_key(req.headers().get(&IDEMPOTENCY_KEY)).map_err(IntoResponse::into_response)?;
    let (mut parts, body) = req.into_parts();
    let bytes = read_body(&parts.headers, body, state.config.body_limit())
        .await
        .map_err(IntoResponse::into_response)?;
    let scope = principal.token_id.to_string();
    let hash = request_hash(&parts.method, &parts.uri, &bytes);
    parts.extensions.insert(principal);

    let begin = state
        .store
        .idempotency_begin(&scope, &key, &hash, in_flight_for(&state))
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    match begin {
        IdempotencyBegin::Started => {}
        IdempotencyBegin::Replay { status, body } => return Ok(replay(status, &body)),
        IdempotencyBegin::InFlight => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "idempotency.in_flight",
                "a request with this Idempotency-Key is still being processed; retry later",
            )
            .into_response())
        }
        IdempotencyBegin::Mismatch => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency.key_reused",
                "this Idempotency-Key was already used for a different request",
            )
            .with_field("Idempotency-Key", "already used for a different request")
            .into_response())
        }
    }

    parts.extensions.insert(IdempotencyClaim {
        scope: scope.clone(),
        key: key.clone(),
    });
    let mut pending = Pending {
        store: state.store.clone(),
        scope,
        key,
        done: false,
    };
    // The key is in flight only as long as the request may run: past that it is given up.
    let deadline = state.config.request_deadline();
    let run = route.oneshot(Request::from_parts(parts, Body::from(bytes)));
    let Ok(Ok(res)) = tokio::time::timeout(deadline, run).await else {
        pending.abort().await;
        tracing::error!(
            ?deadline,
            "a request with an Idempotency-Key ran past its deadline"
        );
        return Err(ApiError::unavailable("the request took too long; retry it").into_response());
    };
    let (mut res_parts, res_body) = res.into_parts();
    let Ok(collected) = res_body.collect().await else {
        pending.abort().await;
        return Err(ApiError::internal().into_response());
    };
    let body = collected.to_bytes();
    if res_parts.status.is_server_error() {
        pending.abort().await;
    } else if let Some(r) = res_parts.extensions.remove::<ReplayWith>() {
        pending
            .finish(r.status.as_u16(), &stored_answer(r.content_type, &r.body))
            .await;
    } else {
        let content_type = res_parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        pending
            .finish(
                res_parts.status.as_u16(),
                &stored_answer(content_type, &body),
            )
            .await;
    }
    Ok(Response::from_parts(res_parts, Body::from(body)))
}

fn in_flight_for(state: &AppState) -> chrono::Duration {
    chrono::Duration::from_std(state.config.request_deadline()).unwrap_or(chrono::Duration::MAX)
}

/// 1 to 255 visible ASCII characters.
fn parse_key(value: Option<&HeaderValue>) -> Result<String, ApiError> {
    value
        .map(HeaderValue::as_bytes)
        .filter(|b| (1..=255).contains(&b.len()) && b.iter().all(|c| c.is_ascii_graphic()))
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "idempotency.key_invalid",
                "Idempotency-Key must be 1 to 255 visible ASCII characters",
            )
            .with_field(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            )
        })
}

fn request_hash(method: &Method, uri: &axum::http::Uri, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(method.as_str().as_bytes());
    h.update(b"\n");
    h.update(uri.path().as_bytes());
    h.update(b"?");
    h.update(uri.query().unwrap_or_default().as_bytes());
    h.update(b"\n");
    h.update(body);
    hex::encode(h.finalize())
}

fn replay(status: u16, stored: &[u8]) -> Response {
    let Ok(status) = StatusCode::from_u16(status) else {
        tracing::error!(status, "stored idempotent response has an invalid status");
        return ApiError::internal().into_response();
    };
    let (content_type, body) = match stored.iter().position(|b| *b == b'\n') {
        Some(i) => (&stored[..i], &stored[i + 1..]),
        None => (&[][..], stored),
    };
    let mut res = (status, Bytes::copy_from_slice(body)).into_response();
    if let Ok(ct) = HeaderValue::from_bytes(content_type) {
        if !content_type.is_empty() {
            res.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
    }
    res.headers_mut()
        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    res
}

/// An entry that has been started; if the request ends any other way (a dropped
/// connection, a panic), it is aborted so a retry can run.
struct Pending {
    store: Store,
    scope: String,
    key: String,
    done: bool,
}

impl Pending {
    async fn finish(&mut self, status: u16, body: &[u8]) {
        self.done = true;
        if let Err(e) = self
            .store
            .idempotency_finish(&self.scope, &self.key, status, body)
            .await
        {
            // The request took effect: leave the entry in flight rather than let a retry
            // run it twice.
            tracing::warn!(error = %e, "could not store an idempotent response");
        }
    }

    async fn abort(&mut self) {
        self.done = true;
        if let Err(e) = self.store.idempotency_abort(&self.scope, &self.key).await {
            tracing::warn!(error = %e, "could not abort an idempotency entry");
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (store, scope, key) = (self.store.clone(), self.scope.clone(), self.key.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = store.idempotency_abort(&scope, &key).await {
                    tracing::warn!(error = %e, "could not abort an idempotency entry");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_be_visible_ascii() {
        let ok = HeaderValue::from_static("order-42_x");
        assert_eq!(parse_key(Some(&ok)).unwrap(), "order-42_x");
        for bad in ["", "has space", &"k".repeat(256)] {
            let v = HeaderValue::from_str(bad).unwrap();
            assert_eq!(
                parse_key(Some(&v)).unwrap_err().code,
                "idempotency.key_invalid"
            );
        }
        let non_ascii = HeaderValue::from_bytes("é".as_bytes()).unwrap();
        assert!(parse_key(Some(&non_ascii)).is_err());
    }

    #[test]
    fn envelopes_round_trip_and_hashes_cover_the_body() {
        let res = replay(201, &stored_answer("application/json", b"{\"a\":1}"));
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(res.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(res.headers()[IDEMPOTENT_REPLAYED], "true");
        let uri: axum::http::Uri = "/v1/sessions".parse().unwrap();
        assert_ne!(
            request_hash(&Method::POST, &uri, b"{}"),
            request_hash(&Method::POST, &uri, b"{ }")
        );
    }
}
