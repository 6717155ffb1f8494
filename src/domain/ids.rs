//! Typed, prefixed identifiers (`ses_…`, `run_…`) backed by UUIDv7 so they sort by time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {kind} id (expected `{prefix}` followed by 32 hex digits)")]
pub struct IdParseError {
    pub kind: &'static str,
    pub prefix: &'static str,
    pub value: String,
}

macro_rules! typed_id {
    ($name:ident, $prefix:literal, $kind:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            pub fn new() -> Self {
                Self(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Wraps a value read back from our own database, which only ever holds valid ids.
            pub fn from_trusted(value: String) -> Self {
                Self(value)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let ok = s.strip_prefix($prefix).is_some_and(|rest| {
                    rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit())
                });
                if ok {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(IdParseError {
                        kind: $kind,
                        prefix: $prefix,
                        value: s.chars().take(80).collect(),
                    })
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdParseError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some(concat!("^", $prefix, "[0-9a-f]{32}$")))
                    .examples([concat!($prefix, "0192f0c1a2b37c4d8e9f0a1b2c3d4e5f")])
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

typed_id!(SessionId, "ses_", "session");
typed_id!(RunId, "run_", "run");
typed_id!(InteractionId, "int_", "interaction");
typed_id!(SuspensionId, "sus_", "suspension");
typed_id!(CheckpointId, "chk_", "checkpoint");
typed_id!(JobId, "job_", "job");
typed_id!(TokenId, "tok_", "token");
typed_id!(LeaseId, "lea_", "lease");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_parse_back_and_sort_by_time() {
        let a = RunId::new();
        let b = RunId::new();
        assert_eq!(a.as_str().parse::<RunId>().unwrap(), a);
        assert!(a < b);
    }

    #[test]
    fn wrong_prefix_or_shape_is_rejected() {
        let ses = SessionId::new();
        assert!(ses.as_str().parse::<RunId>().is_err());
        assert!("run_123".parse::<RunId>().is_err());
        assert!("run_0192f0c1a2b37c4d8e9f0a1b2c3d4e5g"
            .parse::<RunId>()
            .is_err());
        let err = serde_json::from_str::<RunId>("\"nope\"").unwrap_err();
        assert!(err.to_string().contains("not a valid run id"));
    }
}
