//! Input rules shared by the API and the store: each returns the field it objects to.

use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// In characters, as the schema's `maxLength` counts them.
pub const MAX_TEXT_LEN: usize = 1024;

/// `sha256:` followed by 64 lowercase hex digits.
pub fn sha256_digest(field: &str, value: &str) -> Result<(), ValidationError> {
    let ok = value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            "must be `sha256:` followed by 64 lowercase hex digits",
        ))
    }
}

/// Non-empty, unique, each a non-empty string of at most 128 characters.
pub fn allowed_decisions(field: &str, decisions: &[String]) -> Result<(), ValidationError> {
    if decisions.is_empty() {
        return Err(ValidationError::new(
            field,
            "must list at least one decision",
        ));
    }
    let mut seen = HashSet::new();
    for d in decisions {
        if !(1..=128).contains(&d.chars().count()) {
            return Err(ValidationError::new(
                field,
                "each decision must be 1 to 128 characters",
            ));
        }
        if !seen.insert(d.as_str()) {
            return Err(ValidationError::new(
                field,
                format!("decision `{d}` is listed twice"),
            ));
        }
    }
    Ok(())
}

/// A short identifier-like string: 1 to 128 of `[A-Za-z0-9._:-]`.
pub fn name(field: &str, value: &str) -> Result<(), ValidationError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            "must be 1 to 128 characters of letters, digits, `.`, `_`, `:` or `-`",
        ))
    }
}

pub fn text(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.chars().count() > MAX_TEXT_LEN {
        return Err(ValidationError::new(
            field,
            format!("must be at most {MAX_TEXT_LEN} characters"),
        ));
    }
    Ok(())
}

pub fn json_object(field: &str, value: &serde_json::Value) -> Result<(), ValidationError> {
    if value.is_object() {
        Ok(())
    } else {
        Err(ValidationError::new(field, "must be a JSON object"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests() {
        let good = format!("sha256:{}", "a".repeat(64));
        assert!(sha256_digest("h", &good).is_ok());
        assert!(sha256_digest("h", "sha256:abc").is_err());
        assert!(sha256_digest("h", &format!("md5:{}", "a".repeat(64))).is_err());
        assert!(sha256_digest("h", &format!("sha256:{}", "A".repeat(64))).is_err());
    }

    #[test]
    fn decisions_must_be_unique_and_non_empty() {
        assert!(allowed_decisions("d", &[]).is_err());
        assert!(allowed_decisions("d", &["approve".into(), "approve".into()]).is_err());
        assert!(allowed_decisions("d", &["approve".into(), "deny".into()]).is_ok());
        assert_eq!(allowed_decisions("d", &["".into()]).unwrap_err().field, "d");
    }

    #[test]
    fn names() {
        assert!(name("tenant", "acme-prod_1").is_ok());
        assert!(name("tenant", "").is_err());
        assert!(name("tenant", "a b").is_err());
    }
}
