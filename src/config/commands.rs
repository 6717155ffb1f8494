//! The `sagents` command line: its subcommands and their arguments; `serve`'s settings are
//! [`Config`].

use clap::{Parser, Subcommand, ValueEnum};

use super::Config;
use crate::domain::token::Role;

#[derive(Debug, Parser)]
#[command(name = "sagents", version, about = "SAgents lifecycle service")]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Migrate the database, then serve the HTTP API until SIGTERM or SIGINT.
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Print the OpenAPI document as JSON.
    Openapi,
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Work with sandbox providers.
    #[command(subcommand)]
    Provider(ProviderCommand),
    /// Keys that seal provider tokens at rest.
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// The keys that sign sandbox grants.
    #[command(subcommand)]
    Grant(GrantCommand),
    /// The audit trail's hash chains.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Print a chain's records, oldest first, as JSON lines (what `verify` reads).
    Export {
        /// A tenant id, or `*` for the changes that belong to no tenant.
        #[arg(long)]
        tenant: String,
    },
    /// Check a chain exported to a file (JSON lines, or a `GET /v1/audit` page): every hash,
    /// every link, no record missing. Exits non-zero where it breaks.
    Verify { file: std::path::PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Print a fresh random key for `SAGENTS_SECRET_KEY`.
    GenerateKey,
    /// Seal every stored provider token under the first configured key (after a rotation).
    Reseal,
}

#[derive(Debug, Subcommand)]
pub enum GrantCommand {
    /// Print the public key providers check grants with (`ed25519-pub:...`), for their
    /// `--grant-public-key-file`; the signing key is the configured one, else the database's
    /// (generated there if none yet).
    PublicKey,
    /// Print a new private signing key (`ed25519-priv:...`) for `--grant-signing-key-file`.
    GenerateKey,
}

#[derive(Debug, Subcommand)]
pub enum ProviderCommand {
    /// Run the plugin API v3 conformance checks against a provider; exits non-zero on a failure.
    Check {
        /// The provider's base URL, e.g. `http://127.0.0.1:9100`.
        #[arg(long)]
        url: String,
        /// A file holding the provider's bearer token (kept off the command line).
        #[arg(long, env = "SAGENTS_PROVIDER_TOKEN_FILE")]
        token_file: Option<std::path::PathBuf>,
    },
    /// Check a provider's capabilities and register it (or replace it, same id).
    Register {
        #[arg(long)]
        id: String,
        /// The provider's base URL, e.g. `http://127.0.0.1:9100`.
        #[arg(long)]
        url: String,
        /// A file holding the provider's bearer token (kept off the command line).
        #[arg(long, env = "SAGENTS_PROVIDER_TOKEN_FILE")]
        token_file: std::path::PathBuf,
    },
    /// List the registered providers (never their tokens).
    List,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print only its secret (shown once).
    Create {
        #[arg(long, value_enum)]
        role: RoleArg,
        /// Tenant of a frontend or runtime token (default `default`); admin and metrics
        /// tokens take none.
        #[arg(long)]
        tenant: Option<String>,
        /// Seconds until the token expires; never, when absent.
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..=315_360_000))]
        ttl_seconds: Option<i64>,
        /// Who uses it, as people should read it (kept with each decision it makes).
        #[arg(long)]
        name: Option<String>,
    },
    /// List every token (never a secret), one per line.
    List,
    /// Revoke a token by its id.
    Revoke { id: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    Frontend,
    Runtime,
    Admin,
    Metrics,
}

impl From<RoleArg> for Role {
    fn from(r: RoleArg) -> Role {
        match r {
            RoleArg::Frontend => Role::Frontend,
            RoleArg::Runtime => Role::Runtime,
            RoleArg::Admin => Role::Admin,
            RoleArg::Metrics => Role::Metrics,
        }
    }
}
