//! Reading a provider's answer: capped bodies, and every failure classified.

use reqwest::StatusCode;

use super::super::codes;
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
    classify_error_body(status, body)
}

/// Only a v3 error body is the provider's word; anything else (an ingress's HTML page, a
/// bare status, JSON of another shape) says nothing about the sandbox.
pub(super) fn classify_error_body(status: StatusCode, body: &[u8]) -> ProviderCallError {
    let code = status.as_u16();
    let Some(error) = v3_error(body) else {
        return ProviderCallError::uncertain(
            UncertainKind::NotProviderAnswer { status: code },
            format!(
                "{status} that is not a provider's error body: {}",
                first_bytes(body)
            ),
        );
    };
    if error.retryable {
        return ProviderCallError::Recoverable {
            status: code,
            error,
        };
    }
    if status.is_client_error() {
        return ProviderCallError::Refused {
            status: code,
            error,
        };
    }
    if codes::is_terminal(&error) {
        return ProviderCallError::Terminal {
            status: code,
            error,
        };
    }
    ProviderCallError::uncertain(
        UncertainKind::UnknownError { status: code },
        format!(
            "{status} `{}` ({}) is not a terminal code of plugin API v3: {}",
            error.code, error.category, error.message
        ),
    )
}

/// A provider's error body, if `body` is one. The category `uncertain` is the service's own
/// (a call that got no word, such as a timeout): a body claiming it is not the provider's.
fn v3_error(body: &[u8]) -> Option<ProviderError> {
    serde_json::from_slice::<ProviderError>(body)
        .ok()
        .filter(|e| {
            !e.code.trim().is_empty()
                && !e.category.trim().is_empty()
                && e.category != crate::domain::sandbox::ProviderError::UNCERTAIN
        })
}

const SHOWN_BYTES: usize = 120;

fn first_bytes(body: &[u8]) -> String {
    if body.is_empty() {
        return "(empty)".into();
    }
    let shown = String::from_utf8_lossy(&body[..body.len().min(SHOWN_BYTES)]);
    let shown: String = shown
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > SHOWN_BYTES {
        format!("`{shown}`…")
    } else {
        format!("`{shown}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> ProviderCallError {
        classify_error_body(StatusCode::from_u16(status).unwrap(), body.as_bytes())
    }

    fn v3(code: &str, category: &str, retryable: bool) -> String {
        serde_json::json!({"code": code, "category": category, "message": "m", "retryable": retryable})
            .to_string()
    }

    #[test]
    fn a_body_claiming_the_services_own_uncertain_category_is_not_the_providers_word() {
        let spoofed = v3(super::super::TIMED_OUT, "uncertain", true);
        let e = classify_error_body(StatusCode::SERVICE_UNAVAILABLE, spoofed.as_bytes());
        assert_eq!(not_an_answer(&e), Some(503), "{e:?}");
        let honest = v3("provider.internal", "internal", true);
        let e = classify_error_body(StatusCode::SERVICE_UNAVAILABLE, honest.as_bytes());
        assert!(matches!(e, ProviderCallError::Recoverable { .. }), "{e:?}");
    }

    fn not_an_answer(e: &ProviderCallError) -> Option<u16> {
        match e {
            ProviderCallError::Uncertain {
                kind: UncertainKind::NotProviderAnswer { status },
                ..
            } => Some(*status),
            _ => None,
        }
    }

    #[test]
    fn an_ingress_page_is_not_a_provider_answer() {
        let page = "<html><head><title>404 Not Found</title></head><body>nginx</body></html>";
        let e = classify(404, page);
        assert_eq!(not_an_answer(&e), Some(404), "{e:?}");
        assert_eq!(e.to_provider_error().code, "provider.not_a_provider_answer");
        assert!(e.to_provider_error().retryable);
        let shown = e.to_string();
        assert!(
            shown.contains("404") && shown.contains("<title>404 Not Found"),
            "{shown}"
        );
        assert_eq!(
            not_an_answer(&classify(502, "<html>bad gateway</html>")),
            Some(502)
        );
    }

    #[test]
    fn a_bare_status_or_json_of_another_shape_is_not_a_provider_answer() {
        for (status, body) in [
            (404, ""),
            (404, r#"{"error":"not found"}"#),
            (
                404,
                r#"{"code":"","category":"x","message":"m","retryable":false}"#,
            ),
            (401, "no"),
            (429, ""),
            (500, r#"{"code":"sandbox.lost"}"#),
            (503, "upstream connect error"),
        ] {
            assert_eq!(
                not_an_answer(&classify(status, body)),
                Some(status),
                "{status} {body}"
            );
        }
        let long = "x".repeat(5000);
        let shown = classify(404, &long).to_string();
        assert!(shown.len() < 400, "only the first bytes are kept: {shown}");
    }

    #[test]
    fn a_v3_client_error_is_a_refusal_and_a_v3_retryable_one_recoverable() {
        let e = classify(404, &v3(codes::SANDBOX_NOT_FOUND, "not_found", false));
        assert!(
            matches!(&e, ProviderCallError::Refused { status: 404, error } if codes::is_sandbox_not_found(error)),
            "{e:?}"
        );
        let e = classify(409, &v3("fault.injected", "conflict", false));
        assert!(
            matches!(e, ProviderCallError::Refused { status: 409, .. }),
            "{e:?}"
        );
        let e = classify(503, &v3("provider.internal", "internal", true));
        assert!(
            matches!(e, ProviderCallError::Recoverable { status: 503, .. }),
            "{e:?}"
        );
        let e = classify(429, &v3("too_many", "transient", true));
        assert!(
            matches!(e, ProviderCallError::Recoverable { status: 429, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn terminal_is_judged_by_code_not_status() {
        for body in [
            v3(codes::SANDBOX_LOST, "sandbox_failure", false),
            v3(codes::CHECKPOINT_CORRUPT, "internal", false),
            v3("vendor.vm_gone", codes::SANDBOX_FAILURE, false),
        ] {
            let e = classify(500, &body);
            assert!(
                matches!(e, ProviderCallError::Terminal { status: 500, .. }),
                "{body}: {e:?}"
            );
        }
        let e = classify(500, &v3("vendor.oops", "internal", false));
        match &e {
            ProviderCallError::Uncertain {
                kind: UncertainKind::UnknownError { status: 500 },
                message,
            } => assert!(message.contains("vendor.oops"), "{message}"),
            other => panic!("an unknown non-retryable 5xx is not terminal: {other:?}"),
        }
        assert_eq!(e.to_provider_error().code, "provider.unknown_error");
        assert!(e.to_provider_error().retryable);
    }
}
