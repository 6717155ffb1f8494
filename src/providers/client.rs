//! The HTTP client for one sandbox provider (plugin API v3).
//!
//! Every call has a timeout, reads at most a bounded body, follows no redirect, and carries
//! the provider's bearer token (exec: the caller's grant instead), an `x-request-id` and (when
//! known) the fencing token. Every
//! failure is classified so the caller knows whether a retry is safe and whether the side
//! effect may have happened.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::wire::{
    AttachRequest, Capabilities, ExecRequest, ExecResponse, OperationPending, ProvisionRequest,
    ReceiptInconsistency, ReleaseRequest, RestoreRequest, SandboxHandle, SandboxInfo,
    SandboxReleaseReceipt, API_VERSION_V3, FENCING_TOKEN_HEADER, REQUEST_ID_HEADER,
};

mod error;
mod inventory;
mod response;

pub use error::{ProviderCallError, UncertainKind, TIMED_OUT};

use response::{classify_error_status, classify_send_error, read_capped};

pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Per-endpoint timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub capabilities: Duration,
    pub inspect: Duration,
    pub provision: Duration,
    pub attach: Duration,
    pub release: Duration,
    pub restore: Duration,
    /// One page of `GET /v3/sandboxes` or `GET /v3/checkpoints`.
    pub inventory: Duration,
    pub checkpoint_delete: Duration,
    /// Added to the command's own `timeout_seconds`.
    pub exec_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            capabilities: Duration::from_secs(10),
            inspect: Duration::from_secs(10),
            provision: Duration::from_secs(60),
            attach: Duration::from_secs(30),
            release: Duration::from_secs(120),
            restore: Duration::from_secs(120),
            inventory: Duration::from_secs(30),
            checkpoint_delete: Duration::from_secs(30),
            exec_grace: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub timeouts: Timeouts,
    pub max_response_bytes: usize,
    /// How many pages [`ProviderClient::inventory_all`] reads before giving up.
    pub max_inventory_pages: usize,
}

pub const DEFAULT_MAX_INVENTORY_PAGES: usize = 10_000;

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            timeouts: Timeouts::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_inventory_pages: DEFAULT_MAX_INVENTORY_PAGES,
        }
    }
}

/// Per-call metadata.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Propagated as `x-request-id`; a fresh one is made when absent.
    pub request_id: Option<String>,
    /// Overrides the endpoint's default timeout.
    pub timeout: Option<Duration>,
}

/// One client per registered provider; cheap to clone (clones share what was learnt of the
/// provider).
#[derive(Debug, Clone)]
pub struct ProviderClient {
    base_url: url::Url,
    token: Option<String>,
    http: reqwest::Client,
    config: ClientConfig,
    speaks_v3: Arc<AtomicBool>,
}

impl ProviderClient {
    pub fn new(base_url: &str, token: Option<&str>) -> Result<Self, ProviderCallError> {
        Self::with_config(base_url, token, ClientConfig::default())
    }

    pub fn with_config(
        base_url: &str,
        token: Option<&str>,
        config: ClientConfig,
    ) -> Result<Self, ProviderCallError> {
        let mut base_url = url::Url::parse(base_url)
            .map_err(|e| ProviderCallError::Config(format!("base_url: {e}")))?;
        if !matches!(base_url.scheme(), "http" | "https") {
            return Err(ProviderCallError::Config(
                "base_url must be http or https".into(),
            ));
        }
        if !base_url.path().ends_with('/') {
            let path = format!("{}/", base_url.path());
            base_url.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.timeouts.connect)
            // Below a provider's idle cut-off (the reference provider's is 30 s at least), so
            // a pooled connection is not reused just as the provider closes it.
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| ProviderCallError::Config(e.to_string()))?;
        Ok(Self {
            base_url,
            token: token.filter(|t| !t.is_empty()).map(str::to_owned),
            http,
            config,
            speaks_v3: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn base_url(&self) -> &url::Url {
        &self.base_url
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.config.timeouts
    }

    /// Whether both call the same provider the same way (URL, token and settings).
    pub fn same_endpoint(&self, other: &ProviderClient) -> bool {
        self.base_url == other.base_url
            && self.token == other.token
            && self.config.max_response_bytes == other.config.max_response_bytes
            && self.config.timeouts == other.config.timeouts
    }

    /// Whether this provider answered `GET /v3/capabilities` with `api_version` "3": only then
    /// is its error body taken as its word about a sandbox. Asked once per client; a failed
    /// check is asked again next time.
    pub async fn speaks_v3(&self, opts: &CallOptions) -> bool {
        if self.speaks_v3.load(Ordering::Acquire) {
            return true;
        }
        let version = API_VERSION_V3;
        let ok = matches!(
            self.capabilities_raw(opts).await,
            Ok(doc) if doc.get("api_version").and_then(|v| v.as_str()) == Some(version)
        );
        if ok {
            self.speaks_v3.store(true, Ordering::Release);
        }
        ok
    }

    pub async fn capabilities(
        &self,
        opts: &CallOptions,
    ) -> Result<Capabilities, ProviderCallError> {
        let t = self.config.timeouts.capabilities;
        self.call(Method::GET, "v3/capabilities", None::<&()>, None, t, opts)
            .await
    }

    /// The capabilities document as raw JSON, for callers that must judge any shape
    /// (a v2 document included) before trusting it.
    pub async fn capabilities_raw(
        &self,
        opts: &CallOptions,
    ) -> Result<serde_json::Value, ProviderCallError> {
        let t = self.config.timeouts.capabilities;
        self.call(Method::GET, "v3/capabilities", None::<&()>, None, t, opts)
            .await
    }

    pub async fn provision(
        &self,
        req: &ProvisionRequest,
        opts: &CallOptions,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let t = self.config.timeouts.provision;
        let fencing = req.context.fencing_token;
        self.call(Method::POST, "v3/sandboxes", Some(req), fencing, t, opts)
            .await
    }

    pub async fn inspect(
        &self,
        sandbox_id: &str,
        opts: &CallOptions,
    ) -> Result<SandboxInfo, ProviderCallError> {
        let path = sandbox_path(sandbox_id, "")?;
        let t = self.config.timeouts.inspect;
        self.call(Method::GET, &path, None::<&()>, None, t, opts)
            .await
    }

    pub async fn attach(
        &self,
        sandbox_id: &str,
        req: &AttachRequest,
        opts: &CallOptions,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let path = sandbox_path(sandbox_id, "/attach")?;
        let t = self.config.timeouts.attach;
        let fencing = req.context.fencing_token;
        self.call(Method::POST, &path, Some(req), fencing, t, opts)
            .await
    }

    /// Returns only receipts that are consistent and answer this request; anything else is
    /// `Uncertain(InconsistentReceipt)`, to be retried with the same idempotency key.
    pub async fn release(
        &self,
        req: &ReleaseRequest,
        opts: &CallOptions,
    ) -> Result<SandboxReleaseReceipt, ProviderCallError> {
        let path = sandbox_path(&req.request.r#ref.sandbox_id, "/release")?;
        let t = self.config.timeouts.release;
        let fencing = req.context.fencing_token;
        let receipt: SandboxReleaseReceipt = self
            .call(Method::POST, &path, Some(req), fencing, t, opts)
            .await?;
        receipt
            .check_answers(&req.request)
            .map_err(|e: ReceiptInconsistency| {
                ProviderCallError::uncertain(UncertainKind::InconsistentReceipt, e.to_string())
            })?;
        Ok(receipt)
    }

    /// The receipt exactly as the provider sent it, unchecked: for diagnostics and the
    /// conformance checker only; lifecycle code must use [`ProviderClient::release`].
    pub async fn release_unchecked(
        &self,
        req: &ReleaseRequest,
        opts: &CallOptions,
    ) -> Result<SandboxReleaseReceipt, ProviderCallError> {
        let path = sandbox_path(&req.request.r#ref.sandbox_id, "/release")?;
        let t = self.config.timeouts.release;
        let fencing = req.context.fencing_token;
        self.call(Method::POST, &path, Some(req), fencing, t, opts)
            .await
    }

    pub async fn restore(
        &self,
        req: &RestoreRequest,
        opts: &CallOptions,
    ) -> Result<SandboxHandle, ProviderCallError> {
        let t = self.config.timeouts.restore;
        let fencing = req.context.fencing_token;
        self.call(Method::POST, "v3/restores", Some(req), fencing, t, opts)
            .await
    }

    /// Runs a command in the sandbox, authorized by `grant` alone (sent as the bearer token in
    /// place of the provider's service token).
    pub async fn exec(
        &self,
        sandbox_id: &str,
        grant: &str,
        req: &ExecRequest,
        opts: &CallOptions,
    ) -> Result<ExecResponse, ProviderCallError> {
        let path = sandbox_path(sandbox_id, "/exec")?;
        let t = Duration::from_secs(req.timeout_seconds.min(24 * 3600))
            + self.config.timeouts.exec_grace;
        let bearer = Some(grant).filter(|g| !g.is_empty());
        self.send(Method::POST, &path, Some(req), None, t, opts, bearer)
            .await
    }

    /// Exec authorized by the provider's service token, as a caller that has no grant would
    /// try (the conformance checker expects a refusal).
    pub async fn exec_with_service_token(
        &self,
        sandbox_id: &str,
        req: &ExecRequest,
        opts: &CallOptions,
    ) -> Result<ExecResponse, ProviderCallError> {
        let path = sandbox_path(sandbox_id, "/exec")?;
        let t = Duration::from_secs(req.timeout_seconds.min(24 * 3600))
            + self.config.timeouts.exec_grace;
        self.call(Method::POST, &path, Some(req), None, t, opts)
            .await
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        fencing_token: Option<i64>,
        default_timeout: Duration,
        opts: &CallOptions,
    ) -> Result<T, ProviderCallError> {
        let bearer = self.token.as_deref();
        self.send(
            method,
            path,
            body,
            fencing_token,
            default_timeout,
            opts,
            bearer,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn send<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        fencing_token: Option<i64>,
        default_timeout: Duration,
        opts: &CallOptions,
        bearer: Option<&str>,
    ) -> Result<T, ProviderCallError> {
        let url = self
            .base_url
            .join(path)
            .map_err(|e| ProviderCallError::Config(format!("url: {e}")))?;
        let request_id = opts
            .request_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let mut rb = self
            .http
            .request(method, url)
            .timeout(opts.timeout.unwrap_or(default_timeout))
            .header(REQUEST_ID_HEADER, request_id);
        if let Some(token) = bearer {
            rb = rb.bearer_auth(token);
        }
        if let Some(f) = fencing_token {
            rb = rb.header(FENCING_TOKEN_HEADER, f.to_string());
        }
        if let Some(body) = body {
            rb = rb.json(body);
        }
        let mut resp = rb.send().await.map_err(classify_send_error)?;
        let status = resp.status();
        let bytes = read_capped(&mut resp, self.config.max_response_bytes).await?;
        if status == reqwest::StatusCode::ACCEPTED {
            return Err(in_progress(&bytes));
        }
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                ProviderCallError::uncertain(
                    UncertainKind::MalformedBody,
                    format!("{status} with a body that is not the expected JSON: {e}"),
                )
            });
        }
        Err(classify_error_status(status, &resp, &bytes))
    }
}

/// A `202`: the operation runs on; a body of another shape still means "ask again".
fn in_progress(body: &[u8]) -> ProviderCallError {
    const DEFAULT_RETRY_MS: u64 = 1000;
    let (operation, ms) = match serde_json::from_slice::<OperationPending>(body) {
        Ok(p) => (p.operation, p.retry_after_ms),
        Err(_) => ("operation".to_string(), DEFAULT_RETRY_MS),
    };
    ProviderCallError::InProgress {
        operation,
        retry_after: Duration::from_millis(ms.clamp(100, 60_000)),
    }
}

fn sandbox_path(sandbox_id: &str, suffix: &str) -> Result<String, ProviderCallError> {
    check_segment("sandbox id", sandbox_id)?;
    Ok(format!("v3/sandboxes/{sandbox_id}{suffix}"))
}

fn check_segment(what: &str, id: &str) -> Result<(), ProviderCallError> {
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        || id == "."
        || id == ".."
    {
        return Err(ProviderCallError::Config(format!(
            "{what} `{}` is not a safe path segment",
            id.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}
