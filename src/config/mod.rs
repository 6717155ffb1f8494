//! Command line and configuration: every setting is a flag and a `SAGENTS_*` variable.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

mod commands;
mod origins;
mod sealing;
mod secret;
mod strength;
pub use commands::{
    AuditCommand, Cli, Command, GrantCommand, ProviderCommand, RoleArg, SecretsCommand,
    TokenCommand,
};
pub use origins::parse_origin;
pub use sealing::{generate_key, SealError, Sealer};
pub use secret::{DatabaseUrl, Secret};
pub use strength::{WeakSecret, MIN_SECRET_BYTES};

/// Beyond the longest long-poll, the time a request has to read its body and answer.
pub const REQUEST_MARGIN: Duration = Duration::from_secs(15);
/// The shortest checkpoint grace accepted, in seconds.
pub const CHECKPOINT_GRACE_FLOOR: u64 = 600;
/// Seconds a provider call may be given, per operation.
pub const PROVIDER_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;
/// Scheduler workers per replica by default.
pub const DEFAULT_WORKERS: u32 = 4;
/// Runs a scheduler worker claims at once by default: one claim's fixed cost is shared by
/// the whole batch, so fewer, larger claims release more runs per second.
pub const DEFAULT_WORKER_BATCH: u32 = 64;

/// Settings the service refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("settings: {0}")]
pub struct SettingsError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct Config {
    /// `sqlite://PATH` (single machine) or `postgres://…` (several replicas).
    #[arg(
        long,
        env = "SAGENTS_DATABASE_URL",
        default_value = "sqlite://data/sagents.db",
        global = true
    )]
    pub database_url: DatabaseUrl,

    #[arg(
        long,
        env = "SAGENTS_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,

    /// Scheduler workers per replica.
    #[arg(long, env = "SAGENTS_WORKERS", default_value_t = DEFAULT_WORKERS,
          global = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: u32,

    /// Runs one scheduler worker claims and works on at once (the replica's lifecycle
    /// concurrency is workers × batch).
    #[arg(long, env = "SAGENTS_WORKER_BATCH", default_value_t = DEFAULT_WORKER_BATCH,
          global = true, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub worker_batch: u32,

    #[arg(long, env = "SAGENTS_LEASE_TTL_SECONDS", default_value_t = 30, global = true,
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub lease_ttl_seconds: u64,

    /// Lifetime of the lease a lifecycle worker holds on a run while it calls the provider
    /// (renewed every third of it): how soon another replica takes over from a dead one.
    #[arg(long, env = "SAGENTS_LIFECYCLE_LEASE_TTL_SECONDS", default_value_t = 30, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lifecycle_lease_ttl_seconds: u64,

    /// Longest `wait_seconds` a long-poll may ask for.
    #[arg(long, env = "SAGENTS_LONG_POLL_MAX_SECONDS", default_value_t = 60, global = true,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub long_poll_max_seconds: u64,

    /// Megabytes of snapshot bodies one replica keeps in memory to answer `200`s without a
    /// database read (0: none); past it, the least recently read are dropped.
    #[arg(long, env = "SAGENTS_SNAPSHOT_CACHE_MB", default_value_t = 32, global = true,
          value_parser = clap::value_parser!(u64).range(0..=65_536))]
    pub snapshot_cache_mb: u64,

    /// Seconds between heartbeat comments on an idle event stream.
    #[arg(long, env = "SAGENTS_SSE_HEARTBEAT_SECONDS", default_value_t = 15, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sse_heartbeat_seconds: u64,

    /// Event streams one token may hold open at once on one replica; past it, `429`.
    #[arg(long, env = "SAGENTS_SSE_MAX_STREAMS_PER_TOKEN", default_value_t = 16, global = true,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sse_max_streams_per_token: u32,

    /// A connection that sends no complete request head for this long is closed (a slow
    /// client, or a keep-alive left idle): keep a load balancer's idle timeout below it.
    #[arg(long, env = "SAGENTS_HTTP_IDLE_TIMEOUT_SECONDS", default_value_t = 75, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http_idle_timeout_seconds: u64,

    /// Connections one replica serves at once; more wait in the listen backlog.
    #[arg(long, env = "SAGENTS_MAX_CONNECTIONS", default_value_t = 20_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// A request that changes something (`POST`, `PUT`, `PATCH`, `DELETE`) not answered
    /// within this many seconds gets `504` `request.timeout`; a claim has its long-poll on top.
    /// Reads carry no timer.
    #[arg(long, env = "SAGENTS_REQUEST_TIMEOUT_SECONDS", default_value_t = 30, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout_seconds: u64,

    /// Browser origins (`https://app.example.com`, comma-separated) allowed to call the API
    /// from another origin (CORS); none by default, and then no CORS headers at all.
    #[arg(long, env = "SAGENTS_CORS_ORIGINS", value_delimiter = ',', global = true,
          value_parser = parse_origin)]
    pub cors_origins: Vec<String>,

    #[arg(long, env = "SAGENTS_BODY_LIMIT_BYTES", default_value_t = 1_048_576, global = true,
          value_parser = clap::value_parser!(u64).range(1024..=(64 * 1024 * 1024)))]
    pub body_limit_bytes: u64,

    /// Shared secret for HMAC grants instead of Ed25519 ones: providers then verify with the
    /// same secret and can mint grants too. Prefer the default (an Ed25519 key).
    #[arg(
        long,
        env = "SAGENTS_GRANT_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub grant_secret: Option<Secret>,

    /// Ed25519 private key that signs grants (`ed25519-priv:...`, see `sagents grant
    /// generate-key`) [default: generated and stored in the database on first start].
    #[arg(
        long,
        env = "SAGENTS_GRANT_SIGNING_KEY",
        hide_env_values = true,
        global = true
    )]
    pub grant_signing_key: Option<Secret>,

    /// File holding the Ed25519 grant signing key.
    #[arg(
        long,
        env = "SAGENTS_GRANT_SIGNING_KEY_FILE",
        global = true,
        conflicts_with = "grant_signing_key"
    )]
    pub grant_signing_key_file: Option<std::path::PathBuf>,

    /// Keys that seal provider tokens at rest (AES-256-GCM), comma-separated, the sealing
    /// one first (`sagents secrets generate-key`); unset, tokens are stored as given.
    #[arg(
        long,
        env = "SAGENTS_SECRET_KEY",
        hide_env_values = true,
        global = true
    )]
    pub secret_key: Option<Secret>,

    /// A file with the sealing keys, one per line, the sealing one first.
    #[arg(long, env = "SAGENTS_SECRET_KEY_FILE", global = true)]
    pub secret_key_file: Option<std::path::PathBuf>,

    /// Failed attempts after which a release that cannot be confirmed needs an operator
    /// (`needs_attention`).
    #[arg(long, env = "SAGENTS_RELEASE_ATTEMPT_BUDGET", default_value_t = 10, global = true,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub release_attempt_budget: u32,

    /// How often a `needs_attention` release is retried.
    #[arg(long, env = "SAGENTS_ATTENTION_RETRY_SECONDS", default_value_t = 900, global = true,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub attention_retry_seconds: u64,

    /// How often the reconciler compares each provider's inventory with the records
    /// (0: never).
    #[arg(long, env = "SAGENTS_RECONCILE_INTERVAL_SECONDS", default_value_t = 300,
          global = true, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub reconcile_interval_seconds: u64,

    /// A sandbox of an existing run that no record names is left alone this long before the
    /// reconciler calls it an orphan.
    #[arg(long, env = "SAGENTS_RECONCILE_MIN_AGE_SECONDS", default_value_t = 600,
          global = true, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub reconcile_min_age_seconds: u64,

    /// How long a finished run's checkpoints are kept before they are deleted (at least
    /// `CHECKPOINT_GRACE_FLOOR` and twice the release timeout: a release whose answer was
    /// lost may still name its checkpoint when retried).
    #[arg(long, env = "SAGENTS_CHECKPOINT_GRACE_SECONDS", default_value_t = 86_400,
          global = true, value_parser = clap::value_parser!(u64).range(600..=31_536_000))]
    pub checkpoint_grace_seconds: u64,

    /// How long one release call to a provider may take (a snapshot of a large workspace).
    #[arg(long, env = "SAGENTS_PROVIDER_RELEASE_TIMEOUT_SECONDS", default_value_t = 120,
          global = true, value_parser = clap::value_parser!(u64).range(PROVIDER_TIMEOUT_RANGE))]
    pub provider_release_timeout_seconds: u64,

    /// How long one restore call to a provider may take.
    #[arg(long, env = "SAGENTS_PROVIDER_RESTORE_TIMEOUT_SECONDS", default_value_t = 120,
          global = true, value_parser = clap::value_parser!(u64).range(PROVIDER_TIMEOUT_RANGE))]
    pub provider_restore_timeout_seconds: u64,

    /// How long one provision call to a provider may take.
    #[arg(long, env = "SAGENTS_PROVIDER_PROVISION_TIMEOUT_SECONDS", default_value_t = 60,
          global = true, value_parser = clap::value_parser!(u64).range(PROVIDER_TIMEOUT_RANGE))]
    pub provider_provision_timeout_seconds: u64,

    /// How long one attach call to a provider may take.
    #[arg(long, env = "SAGENTS_PROVIDER_ATTACH_TIMEOUT_SECONDS", default_value_t = 30,
          global = true, value_parser = clap::value_parser!(u64).range(PROVIDER_TIMEOUT_RANGE))]
    pub provider_attach_timeout_seconds: u64,

    #[arg(
        long,
        env = "SAGENTS_LOG_FORMAT",
        value_enum,
        default_value = "pretty",
        global = true
    )]
    pub log_format: LogFormat,
}

impl Config {
    /// The defaults, as `sagents serve` with no flags and no environment would use them.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        Self {
            database_url: DatabaseUrl::from(database_url.into()),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            workers: DEFAULT_WORKERS,
            worker_batch: DEFAULT_WORKER_BATCH,
            lease_ttl_seconds: 30,
            lifecycle_lease_ttl_seconds: 30,
            long_poll_max_seconds: 60,
            snapshot_cache_mb: 32,
            sse_heartbeat_seconds: 15,
            sse_max_streams_per_token: 16,
            body_limit_bytes: 1_048_576,
            http_idle_timeout_seconds: 75,
            max_connections: 20_000,
            request_timeout_seconds: 30,
            cors_origins: Vec::new(),
            grant_secret: None,
            secret_key: None,
            secret_key_file: None,
            grant_signing_key: None,
            grant_signing_key_file: None,
            release_attempt_budget: 10,
            attention_retry_seconds: 900,
            reconcile_interval_seconds: 300,
            reconcile_min_age_seconds: 600,
            checkpoint_grace_seconds: 86_400,
            provider_release_timeout_seconds: 120,
            provider_restore_timeout_seconds: 120,
            provider_provision_timeout_seconds: 60,
            provider_attach_timeout_seconds: 30,
            log_format: LogFormat::Pretty,
        }
    }

    /// The sealer of secrets at rest from `secret_key` or `secret_key_file`.
    pub fn sealer(&self) -> Result<Sealer, SealError> {
        // An empty variable (as compose passes an unset one) counts as unset.
        let keys = self.secret_key.as_ref().filter(|k| !k.expose().is_empty());
        let file = self
            .secret_key_file
            .as_ref()
            .filter(|f| !f.as_os_str().is_empty());
        match (keys, file) {
            (Some(_), Some(_)) => Err(SealError::KeyFile(
                "give SAGENTS_SECRET_KEY or SAGENTS_SECRET_KEY_FILE, not both".into(),
            )),
            (Some(keys), None) => Sealer::from_keys(keys.expose()),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| SealError::KeyFile(format!("{}: {e}", path.display())))
                .and_then(|text| Sealer::from_keys(&text)),
            (None, None) => Ok(Sealer::default()),
        }
    }

    /// Settings that are valid alone but not together.
    pub fn check_settings(&self) -> Result<(), SettingsError> {
        let floor = self.checkpoint_grace_floor();
        if self.checkpoint_grace_seconds < floor {
            return Err(SettingsError(format!(
                "SAGENTS_CHECKPOINT_GRACE_SECONDS is {}, below {floor}: a checkpoint must outlive \
                 twice the release timeout (SAGENTS_PROVIDER_RELEASE_TIMEOUT_SECONDS = {}) and \
                 at least {CHECKPOINT_GRACE_FLOOR} s, so that a retried release whose first \
                 answer was lost still finds it",
                self.checkpoint_grace_seconds, self.provider_release_timeout_seconds
            )));
        }
        Ok(())
    }

    /// The shortest checkpoint grace these settings allow: twice the release timeout, and
    /// never below [`CHECKPOINT_GRACE_FLOOR`].
    pub fn checkpoint_grace_floor(&self) -> u64 {
        CHECKPOINT_GRACE_FLOOR.max(self.provider_release_timeout_seconds.saturating_mul(2))
    }

    pub fn provider_release_timeout(&self) -> Duration {
        Duration::from_secs(self.provider_release_timeout_seconds)
    }

    pub fn provider_restore_timeout(&self) -> Duration {
        Duration::from_secs(self.provider_restore_timeout_seconds)
    }

    pub fn provider_provision_timeout(&self) -> Duration {
        Duration::from_secs(self.provider_provision_timeout_seconds)
    }

    pub fn provider_attach_timeout(&self) -> Duration {
        Duration::from_secs(self.provider_attach_timeout_seconds)
    }

    pub fn lease_ttl(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::try_from(self.lease_ttl_seconds).unwrap_or(i64::MAX))
    }

    pub fn long_poll_max(&self) -> Duration {
        Duration::from_secs(self.long_poll_max_seconds)
    }

    /// The longest a request may run: the longest long-poll and a margin for reading the body
    /// and writing the answer. An `Idempotency-Key` is in flight for no longer than this.
    pub fn request_deadline(&self) -> Duration {
        self.long_poll_max() + REQUEST_MARGIN
    }

    /// The bound of a request that changes something ([`Self::request_timeout_seconds`]).
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_seconds)
    }

    pub fn sse_heartbeat(&self) -> Duration {
        Duration::from_secs(self.sse_heartbeat_seconds)
    }

    pub fn body_limit(&self) -> usize {
        usize::try_from(self.body_limit_bytes).unwrap_or(usize::MAX)
    }

    /// The snapshot cache's byte budget for bodies.
    pub fn snapshot_cache_bytes(&self) -> usize {
        usize::try_from(self.snapshot_cache_mb << 20).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests;
