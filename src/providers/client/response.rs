//! Reading a provider's answer: capped bodies, and every failure classified.

use reqwest::StatusCode;

use super::super::wire::ProviderError;
use super::{ProviderCallError, UncertainKind};

pub(super) fn classify_send_error(e: reqwest::Error) -> ProviderCallError {
    if e.is_timeout() {
        ProviderCallError::uncertain(UncertainKind::Timeout, e.to_string())
    } else if e.is_connect() {
        ProviderCallError::Unreachable(error_chain(&e))
    } else if e.is_builder() {
        ProviderCallError::Config(e.to_string())
    } else {
        ProviderCallError::uncertain(UncertainKind::ConnectionLost, error_chain(&e))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

pub(super) async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, ProviderCallError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(ProviderCallError::uncertain(
            UncertainKind::OversizedBody,
            format!("the response declares more than {cap} bytes"),
        ));
    }
    let mut buf = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if buf.len() + chunk.len() > cap {
                    return Err(ProviderCallError::uncertain(
                        UncertainKind::OversizedBody,
                        format!("the response is larger than {cap} bytes"),
                    ));
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(buf),
            Err(e) if e.is_timeout() => {
                return Err(ProviderCallError::uncertain(
                    UncertainKind::Timeout,
                    error_chain(&e),
                ))
            }
            Err(e) => {
                return Err(ProviderCallError::uncertain(
                    UncertainKind::ConnectionLost,
                    format!("the response was cut: {}", error_chain(&e)),
                ))
            }
        }
    }
}

pub(super) fn classify_error_status(
    status: StatusCode,
    resp: &reqwest::Response,
    body: &[u8],
) -> ProviderCallError {
    let code = status.as_u16();
    if status.is_redirection() {
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        return ProviderCallError::uncertain(
            UncertainKind::Redirect,
            format!("the provider answered {status} to `{location}`; redirects are not followed"),
        );
    }
    match serde_json::from_slice::<ProviderError>(body) {
        Ok(error) if error.retryable => ProviderCallError::Recoverable {
            status: code,
            error,
        },
        Ok(error) if status.is_client_error() => ProviderCallError::Refused {
            status: code,
            error,
        },
        Ok(error) => ProviderCallError::Terminal {
            status: code,
            error,
        },
        Err(_) if status.is_client_error() && !matches!(code, 408 | 429) => {
            ProviderCallError::Refused {
                status: code,
                error: ProviderError {
                    code: format!("provider.http_{code}"),
                    category: "invalid_request".into(),
                    message: format!(
                        "{status}: {}",
                        String::from_utf8_lossy(&body[..body.len().min(200)])
                    ),
                    retryable: false,
                },
            }
        }
        Err(_) => ProviderCallError::uncertain(
            UncertainKind::UnexpectedStatus,
            format!("{status} without a provider error body"),
        ),
    }
}
