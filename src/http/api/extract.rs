//! Request extractors that turn every kind of bad input into a precise problem.

use std::str::FromStr;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::state::AppState;
use crate::domain::ids::IdParseError;
use crate::http::server::strict::Strict;

/// What a command's checks may need besides the command itself.
#[derive(Debug, Clone, Copy)]
pub struct CheckContext {
    pub now: DateTime<Utc>,
    pub long_poll_max_seconds: u64,
}

/// A JSON request body: deserialized strictly, then checked.
pub trait Command: DeserializeOwned {
    /// Runs on the raw JSON when typed deserialization failed, to give a more precise
    /// problem than the shape error (e.g. an unsupported spec version).
    fn precheck(_raw: &serde_json::Value) -> Result<(), ApiError> {
        Ok(())
    }

    fn check(&self, _ctx: &CheckContext) -> Result<(), ApiError> {
        Ok(())
    }
}

/// A JSON body of type `T` (`content-type: application/json`, at most the body limit).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: Command> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        require_json(req.headers())?;
        let limit = state.config.body_limit();
        let (parts, body) = req.into_parts();
        let bytes = read_body(&parts.headers, body, limit).await?;
        let cmd = parse_json::<T>(&bytes)?;
        cmd.check(&CheckContext {
            now: state.clock.now(),
            long_poll_max_seconds: state.config.long_poll_max_seconds,
        })?;
        Ok(ApiJson(cmd))
    }
}

fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let essence = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        Some(t) if t.starts_with("application/") && t.ends_with("+json") => Ok(()),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "request.unsupported_media_type",
            match other {
                Some(t) => format!("content-type `{t}` is not supported; send `application/json`"),
                None => "the request body needs `content-type: application/json`".to_owned(),
            },
        )),
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request.too_large",
        format!("the request body is larger than the limit of {limit} bytes"),
    )
}

/// Reads at most `limit` bytes of a body (413 beyond), refusing early on `content-length`.
pub async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(limit)),
        Err(e) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.body_unreadable",
            format!("the request body could not be read: {e}"),
        )),
    }
}

/// Strict JSON: syntax errors → 400 with line and column; shape errors → 422 naming the field.
pub fn parse_json<T: Command>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = match serde_path_to_error::deserialize::<_, T>(Strict(&mut de)) {
        Ok(v) => v,
        Err(err) if !err.inner().is_data() => return Err(malformed(err.inner())),
        Err(err) => {
            if let Ok(raw) = serde_json::from_slice::<serde_json::Value>(bytes) {
                T::precheck(&raw)?;
            }
            let message = strip_position(&err.inner().to_string());
            return Err(ApiError::invalid(
                field_of(&err.path().to_string(), &message),
                message,
            ));
        }
    };
    de.end().map_err(|e| malformed(&e))?;
    Ok(value)
}

fn malformed(e: &serde_json::Error) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "request.malformed_json",
        format!(
            "the body is not valid JSON: {} (line {}, column {})",
            strip_position(&e.to_string()),
            e.line(),
            e.column()
        ),
    )
}

/// serde_json appends " at line L column C"; the problem reports position separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The full path of the field a deserialization error is about. Missing and unknown fields
/// are reported by serde at their parent, so their name is taken from the message.
fn field_of(path: &str, message: &str) -> String {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next());
    let parent = if path == "." { "" } else { path };
    match named {
        Some(name) if parent.is_empty() => name.to_owned(),
        Some(name) if parent.ends_with(name) => parent.to_owned(),
        Some(name) => format!("{parent}.{name}"),
        None if parent.is_empty() => "body".to_owned(),
        None => parent.to_owned(),
    }
}

/// Query parameters of type `T`; unknown parameters are ignored.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|err| {
                let message = err.inner().to_string();
                ApiError::invalid(field_of(&err.path().to_string(), &message), message)
            })
    }
}

/// The `If-None-Match` header, if any.
#[derive(Debug)]
pub struct IfNoneMatch(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IfNoneMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        match parts.headers.get(header::IF_NONE_MATCH) {
            None => Ok(IfNoneMatch(None)),
            Some(v) => v
                .to_str()
                .map(|v| IfNoneMatch(Some(v.to_owned())))
                .map_err(|_| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "request.bad_header",
                        "If-None-Match must be visible ASCII",
                    )
                }),
        }
    }
}

/// The path parameters of a route, parsed into typed ids on demand.
#[derive(Debug)]
pub struct PathIds(RawPathParams);

impl<S: Send + Sync> FromRequestParts<S> for PathIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        RawPathParams::from_request_parts(parts, state)
            .await
            .map(PathIds)
            .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "route.not_found", e.body_text()))
    }
}

impl PathIds {
    /// A malformed id names nothing that exists: 404 `<kind>.not_found`.
    pub fn get<T: FromStr<Err = IdParseError>>(&self, name: &str) -> Result<T, ApiError> {
        let raw = self
            .0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| ApiError::internal_route(name))?;
        Ok(raw.parse::<T>()?)
    }

    /// A parameter that is not an id, as given (checked by its user).
    pub fn text(&self, name: &str) -> Result<&str, ApiError> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| ApiError::internal_route(name))
    }
}

impl ApiError {
    /// A handler asked for a path parameter its route does not have: a routing bug.
    fn internal_route(name: &str) -> Self {
        tracing::error!(param = name, "route has no such path parameter");
        ApiError::internal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Checkpoint {
        codec_version: String,
        sequence: i64,
        state: serde_json::Value,
        resolved_spec_hash: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct SuspendRun {
        fencing_token: i64,
        reason: crate::domain::interaction::SuspensionReason,
        checkpoint: Checkpoint,
    }

    impl Command for SuspendRun {
        fn check(&self, _: &CheckContext) -> Result<(), ApiError> {
            Ok(())
        }
    }

    fn field(body: &str) -> (u16, String, String) {
        let e = parse_json::<SuspendRun>(body.as_bytes()).unwrap_err();
        let f = e
            .errors
            .first()
            .map(|f| f.field.clone())
            .unwrap_or_default();
        (e.status.as_u16(), e.code.to_string(), f)
    }

    #[test]
    fn every_shape_error_names_its_field() {
        let ok = r#"{"fencing_token":1,"reason":"approval_required",
            "checkpoint":{"codec_version":"v1","sequence":1,"state":{},"resolved_spec_hash":"h"}}"#;
        assert!(parse_json::<SuspendRun>(ok.as_bytes()).is_ok());
        assert_eq!(
            field(&ok.replace("\"fencing_token\":1", "\"fencing_token\":\"x\"")),
            (422, "request.invalid".into(), "fencing_token".into())
        );
        assert_eq!(
            field(&ok.replace("\"sequence\":1,", "")).2,
            "checkpoint.sequence"
        );
        assert_eq!(
            field(&ok.replace("\"sequence\":1,", "\"sequence\":1,\"extra\":2,")).2,
            "checkpoint.extra"
        );
        assert_eq!(
            field(&ok.replace("\"fencing_token\":1,", "")).2,
            "fencing_token"
        );
        assert_eq!(field(&ok.replace("approval_required", "nap")).2, "reason");
        let (status, code, _) = field(r#"{"fencing_token": 1,"#);
        assert_eq!((status, code.as_str()), (400, "request.malformed_json"));
        let (status, _, _) = field(&format!("{ok} {{}}"));
        assert_eq!(status, 400);
        assert_eq!(field("[1]").2, "body");
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert!(require_json(&h).is_err());
        h.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(require_json(&h).is_ok());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert_eq!(
            require_json(&h).unwrap_err().status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }
}
