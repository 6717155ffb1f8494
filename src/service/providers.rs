//! Provider registration: a provider is accepted only if it speaks plugin API v3 and offers
//! `execution.sandbox`; v2 plugins are refused without fallback.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::interaction::Resolver;
use crate::domain::validate::{self, ValidationError};
use crate::providers::client::{CallOptions, ProviderCallError, ProviderClient, UncertainKind};
use crate::providers::wire::{Capabilities, API_VERSION_V3, CAPABILITY_SANDBOX};
use crate::store::{ProviderRecord, Store, StoreError};

/// `POST /v1/admin/providers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterProvider {
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub provider_id: String,
    /// `http://` or `https://`.
    #[schema(max_length = 1024, pattern = "^https?://")]
    pub base_url: String,
    /// The provider's own bearer token; stored, never listed.
    #[schema(max_length = 1024, pattern = "^[^\\x00-\\x20\\x7f-\\x9f]*$")]
    pub token: String,
}

impl RegisterProvider {
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate::name("provider_id", &self.provider_id)?;
        validate::text("base_url", &self.base_url)?;
        let url = url::Url::parse(&self.base_url)
            .map_err(|e| ValidationError::new("base_url", format!("is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ValidationError::new("base_url", "must be http or https"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(ValidationError::new("base_url", "must name a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ValidationError::new(
                "base_url",
                "must not carry credentials; use `token`",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(ValidationError::new(
                "base_url",
                "must not have a query or a fragment",
            ));
        }
        validate::text("token", &self.token)?;
        if self.token.chars().any(|c| c.is_control() || c == ' ') {
            return Err(ValidationError::new(
                "token",
                "must not contain spaces or control characters",
            ));
        }
        Ok(())
    }
}

/// A registered provider as listed to operators: never its token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProviderInfo {
    pub provider_id: String,
    pub base_url: String,
    pub capabilities: Capabilities,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How the HTTP layer should answer a registry failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryErrorClass {
    /// 422: the request or the provider's answer is not acceptable.
    Unprocessable,
    /// 502: the provider could not be reached or answered nonsense.
    BadGateway,
    /// 503: our database is unavailable.
    Unavailable,
    /// 500.
    Internal,
}

impl RegistryErrorClass {
    pub fn http_status(self) -> u16 {
        match self {
            RegistryErrorClass::Unprocessable => 422,
            RegistryErrorClass::BadGateway => 502,
            RegistryErrorClass::Unavailable => 503,
            RegistryErrorClass::Internal => 500,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("the provider does not speak plugin API v3 with `execution.sandbox`: {0}")]
    ApiVersionUnsupported(String),
    #[error("the provider's capabilities are not acceptable: {0}")]
    CapabilitiesInvalid(String),
    #[error("the provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the provider refused the capability request (check the token): {0}")]
    ProviderRefused(String),
    #[error("the stored capabilities of provider `{0}` are unreadable")]
    CorruptRecord(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RegistryError {
    /// The stable problem code.
    pub fn code(&self) -> &'static str {
        match self {
            RegistryError::Invalid(_) => "validation.failed",
            RegistryError::ApiVersionUnsupported(_) => "provider.api_version_unsupported",
            RegistryError::CapabilitiesInvalid(_) => "provider.capabilities_invalid",
            RegistryError::Unreachable(_) => "provider.unreachable",
            RegistryError::ProviderRefused(_) => "provider.refused",
            RegistryError::CorruptRecord(_) => "provider.record_corrupt",
            RegistryError::Store(StoreError::Unavailable(_)) => "store.unavailable",
            RegistryError::Store(_) => "store.error",
        }
    }

    pub fn class(&self) -> RegistryErrorClass {
        match self {
            RegistryError::Invalid(_)
            | RegistryError::ApiVersionUnsupported(_)
            | RegistryError::CapabilitiesInvalid(_)
            | RegistryError::ProviderRefused(_) => RegistryErrorClass::Unprocessable,
            RegistryError::Unreachable(_) => RegistryErrorClass::BadGateway,
            RegistryError::Store(StoreError::Unavailable(_)) => RegistryErrorClass::Unavailable,
            RegistryError::Store(StoreError::Invalid(_)) => RegistryErrorClass::Unprocessable,
            RegistryError::CorruptRecord(_) | RegistryError::Store(_) => {
                RegistryErrorClass::Internal
            }
        }
    }

    pub fn http_status(&self) -> u16 {
        self.class().http_status()
    }
}

/// The pure capability rule: API v3, `execution.sandbox`, and an honest dispositions list.
pub fn check_capabilities(caps: &Capabilities) -> Result<(), RegistryError> {
    if caps.api_version != API_VERSION_V3 {
        return Err(RegistryError::ApiVersionUnsupported(format!(
            "api_version is `{}`, only `{API_VERSION_V3}` is accepted",
            caps.api_version.chars().take(40).collect::<String>()
        )));
    }
    if caps.capability != CAPABILITY_SANDBOX {
        return Err(RegistryError::ApiVersionUnsupported(format!(
            "capability is `{}`, `{CAPABILITY_SANDBOX}` is required",
            caps.capability.chars().take(80).collect::<String>()
        )));
    }
    if caps.supported_release_dispositions.is_empty() {
        return Err(RegistryError::CapabilitiesInvalid(
            "supported_release_dispositions is empty".into(),
        ));
    }
    let snapshot = crate::providers::wire_spec::ReleaseDisposition::SnapshotAndTerminate;
    if caps.supported_release_dispositions.contains(&snapshot) && !caps.supports_snapshot {
        return Err(RegistryError::CapabilitiesInvalid(
            "advertises snapshot_and_terminate but supports_snapshot is false".into(),
        ));
    }
    let known = ["max_processes", "memory_mb", "cpu_percent"];
    for (i, field) in caps.bounded_resources.iter().enumerate() {
        if !known.contains(&field.as_str()) || caps.bounded_resources[..i].contains(field) {
            return Err(RegistryError::CapabilitiesInvalid(format!(
                "bounded_resources names `{}`: each entry must be one of {known:?}, once",
                field.chars().take(40).collect::<String>()
            )));
        }
    }
    Ok(())
}

/// Fetches `GET /v3/capabilities` and applies [`check_capabilities`]. Anything that is not a
/// v3 capabilities document (a v2 one included) is refused as unsupported.
pub async fn fetch_capabilities(
    base_url: &str,
    token: Option<&str>,
) -> Result<Capabilities, RegistryError> {
    let client = ProviderClient::new(base_url, token)
        .map_err(|e| ValidationError::new("base_url", e.to_string()))?;
    let raw: serde_json::Value = match client.capabilities_raw(&CallOptions::default()).await {
        Ok(v) => v,
        Err(e) => return Err(unreachable_or_refused(e)),
    };
    let version = raw.get("api_version");
    if version != Some(&serde_json::Value::String(API_VERSION_V3.into())) {
        let shown = version.map_or("missing".to_string(), |v| v.to_string());
        return Err(RegistryError::ApiVersionUnsupported(format!(
            "api_version is {}, only \"{API_VERSION_V3}\" is accepted",
            shown.chars().take(40).collect::<String>()
        )));
    }
    let caps: Capabilities = serde_json::from_value(raw)
        .map_err(|e| RegistryError::CapabilitiesInvalid(e.to_string()))?;
    check_capabilities(&caps)?;
    Ok(caps)
}

fn unreachable_or_refused(e: ProviderCallError) -> RegistryError {
    match e {
        ProviderCallError::Config(m) => ValidationError::new("base_url", m).into(),
        ProviderCallError::Refused { status: 404, .. }
        | ProviderCallError::Uncertain {
            kind: UncertainKind::NotProviderAnswer { status: 404 },
            ..
        } => RegistryError::ApiVersionUnsupported(
            "the provider has no `/v3/capabilities` endpoint".into(),
        ),
        e @ ProviderCallError::Refused { .. } => RegistryError::ProviderRefused(e.to_string()),
        other => RegistryError::Unreachable(other.to_string()),
    }
}

/// Checks the provider's capabilities, then inserts or replaces it.
pub async fn register_provider(
    store: &Store,
    req: &RegisterProvider,
    by: impl Into<Resolver>,
) -> Result<ProviderInfo, RegistryError> {
    req.validate()?;
    let caps = fetch_capabilities(&req.base_url, Some(&req.token)).await?;
    if caps.provider_id != req.provider_id {
        // Grants name the registered id; a provider that checks them against its own refuses.
        tracing::warn!(provider_id = %req.provider_id, calls_itself = %caps.provider_id,
            "the provider calls itself by another id: if it checks the audience of grants, every exec will be refused; register it under its own id");
    }
    if caps.unauthenticated {
        tracing::warn!(provider_id = %req.provider_id, "the provider serves without a token: anyone who reaches it may provision, release and restore sandboxes");
    }
    let json = serde_json::to_value(&caps)
        .map_err(|e| RegistryError::CapabilitiesInvalid(e.to_string()))?;
    let record = store
        .upsert_provider(&req.provider_id, &req.base_url, &req.token, &json, by)
        .await?;
    info_of(record)
}

pub async fn list_providers(store: &Store) -> Result<Vec<ProviderInfo>, RegistryError> {
    store
        .list_providers_as_stored()
        .await?
        .into_iter()
        .map(info_of)
        .collect()
}

/// A ready client for a registered provider.
pub fn client_for(record: &ProviderRecord) -> Result<ProviderClient, ProviderCallError> {
    ProviderClient::new(&record.base_url, Some(&record.token))
}

fn info_of(record: ProviderRecord) -> Result<ProviderInfo, RegistryError> {
    let capabilities = serde_json::from_value(record.capabilities)
        .map_err(|_| RegistryError::CorruptRecord(record.provider_id.clone()))?;
    Ok(ProviderInfo {
        provider_id: record.provider_id,
        base_url: record.base_url,
        capabilities,
        created_at: record.created_at,
        updated_at: record.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::wire_spec::ReleaseDisposition;

    fn caps() -> Capabilities {
        Capabilities {
            api_version: "3".into(),
            capability: CAPABILITY_SANDBOX.into(),
            provider_id: "local".into(),
            provider_version: "0.1.0".into(),
            isolation_level: "process".into(),
            supported_release_dispositions: ReleaseDisposition::ALL.to_vec(),
            supports_snapshot: true,
            supports_restore: true,
            supports_reconnect: true,
            max_lifetime_seconds: None,
            supports_exec: false,
            supports_inventory: false,
            supports_checkpoint_delete: false,
            unauthenticated: false,
            bounded_resources: Vec::new(),
        }
    }

    #[test]
    fn v3_sandbox_capabilities_are_accepted() {
        assert!(check_capabilities(&caps()).is_ok());
    }

    #[test]
    fn v2_or_missing_capability_is_refused_without_fallback() {
        let mut c = caps();
        c.api_version = "2".into();
        let e = check_capabilities(&c).unwrap_err();
        assert_eq!(e.code(), "provider.api_version_unsupported");
        assert_eq!(e.http_status(), 422);
        let mut c = caps();
        c.capability = "execution.container".into();
        assert_eq!(
            check_capabilities(&c).unwrap_err().code(),
            "provider.api_version_unsupported"
        );
    }

    #[test]
    fn dishonest_dispositions_are_refused() {
        let mut c = caps();
        c.supports_snapshot = false;
        assert_eq!(
            check_capabilities(&c).unwrap_err().code(),
            "provider.capabilities_invalid"
        );
        c.supported_release_dispositions.clear();
        assert!(check_capabilities(&c).is_err());
    }

    #[test]
    fn bounded_resources_name_known_spec_fields_once() {
        let mut c = caps();
        c.bounded_resources = vec!["max_processes".into(), "memory_mb".into()];
        assert!(check_capabilities(&c).is_ok());
        for bad in [
            vec!["disk_mb".to_owned()],
            vec!["memory_mb".to_owned(), "memory_mb".to_owned()],
            vec!["x".repeat(10_000)],
        ] {
            c.bounded_resources = bad;
            assert_eq!(
                check_capabilities(&c).unwrap_err().code(),
                "provider.capabilities_invalid"
            );
        }
    }

    #[test]
    fn registration_input_is_validated() {
        let ok = RegisterProvider {
            provider_id: "local-1".into(),
            base_url: "http://127.0.0.1:9000".into(),
            token: "t0k".into(),
        };
        assert!(ok.validate().is_ok());
        for (field, bad) in [
            (
                "provider_id",
                RegisterProvider {
                    provider_id: "no spaces".into(),
                    ..ok.clone()
                },
            ),
            (
                "base_url",
                RegisterProvider {
                    base_url: "ftp://host/".into(),
                    ..ok.clone()
                },
            ),
            (
                "base_url",
                RegisterProvider {
                    base_url: "not a url".into(),
                    ..ok.clone()
                },
            ),
            (
                "base_url",
                RegisterProvider {
                    base_url: "http://user:pw@host/".into(),
                    ..ok.clone()
                },
            ),
        ] {
            assert_eq!(bad.validate().unwrap_err().field, field);
        }
        let unknown =
            serde_json::json!({"provider_id": "a", "base_url": "http://h", "token": "t", "x": 1});
        assert!(serde_json::from_value::<RegisterProvider>(unknown).is_err());
    }

    #[test]
    fn error_classes_map_to_statuses() {
        assert_eq!(RegistryError::Unreachable("x".into()).http_status(), 502);
        assert_eq!(
            RegistryError::Store(StoreError::Unavailable("db".into())).http_status(),
            503
        );
    }
}
