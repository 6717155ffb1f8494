#![allow(clippy::print_stdout, reason = "the CLI answers on stdout")]

use std::sync::Arc;

use anyhow::Context;
use clap::Parser;

use sagents::app::Application;
use sagents::clock::{Clock, SystemClock};
use sagents::config::{
    self, AuditCommand, Cli, Command, Config, GrantCommand, ProviderCommand, SecretsCommand,
    TokenCommand,
};
use sagents::domain::token::NewToken;
use sagents::domain::TokenId;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::providers::conformance;
use sagents::service::providers::{self, RegisterProvider};
use sagents::service::tokens::{self, tenant_for};
use sagents::service::{audit, grants};
use sagents::store::Store;
use sagents::{http, telemetry};

// jemalloc leaves the untouched part of a connection's buffers unmapped and gives memory freed
// after a burst back to the kernel.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options: a background thread returns memory freed for a second to the kernel,
/// so what a burst of writes left behind is not held while the service idles or long-polls.
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let logs = telemetry::init(cli.config.log_format).context("starting the log thread")?;
    let result = run(cli, &logs).await;
    // Every line logged until now is written out before the process exits.
    logs.flush();
    result
}

async fn run(cli: Cli, logs: &telemetry::LogGuard) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve => {
            let app = Application::build(cli.config, Arc::new(SystemClock))
                .await?
                .with_request_log(logs.request_log());
            app.state().metrics.track_log_drops(logs.dropped_lines());
            app.run_until_stopped().await?;
        }
        Command::Migrate => {
            let store = open_store(&cli.config).await?;
            store.migrate().await.context("migration failed")?;
            store.close().await;
            tracing::info!("migrations applied");
        }
        Command::Openapi => {
            let doc = http::openapi_document_for(&cli.config);
            println!(
                "{}",
                doc.to_pretty_json()
                    .context("cannot render the OpenAPI document")?
            );
        }
        Command::Token(TokenCommand::Create {
            role,
            tenant,
            ttl_seconds,
            name,
        }) => {
            let role = role.into();
            let tenant = tenant_for(role, tenant.as_deref())?;
            let store = open_store(&cli.config).await?;
            store.migrate().await.context("migration failed")?;
            let expires_at = ttl_seconds.map(|s| store.now() + chrono::Duration::seconds(s));
            let new = NewToken {
                role,
                tenant,
                expires_at,
                name,
            };
            let (_, secret) = store.create_token_keyed(&new, "cli", None).await?;
            store.close().await;
            println!("{secret}");
        }
        Command::Audit(AuditCommand::Export { tenant }) => {
            let store = open_migrated(&cli.config).await?;
            let written = audit::export(&store, &tenant, &mut std::io::stdout().lock()).await;
            store.close().await;
            written?;
        }
        Command::Audit(AuditCommand::Verify { file }) => {
            println!("{}", audit::verify_file(&file)?);
        }
        Command::Token(TokenCommand::List) => {
            let store = open_migrated(&cli.config).await?;
            let tokens = store.list_tokens().await?;
            store.close().await;
            for t in tokens {
                println!("{}", tokens::describe(&t));
            }
        }
        Command::Token(TokenCommand::Revoke { id }) => {
            let id: TokenId = id.parse().context("not a token id")?;
            let store = open_migrated(&cli.config).await?;
            let revoked = store.revoke_token(&id, "cli").await;
            store.close().await;
            println!("{}", tokens::describe(&revoked?));
        }
        Command::Provider(ProviderCommand::Register {
            id,
            url,
            token_file,
        }) => {
            let req = RegisterProvider {
                provider_id: id,
                base_url: url,
                token: read_token(&token_file)?,
            };
            let store = open_migrated(&cli.config).await?;
            let registered = providers::register_provider(&store, &req, "cli").await;
            store.close().await;
            let info = registered?;
            println!("registered {} at {}", info.provider_id, info.base_url);
        }
        Command::Provider(ProviderCommand::List) => {
            let store = open_migrated(&cli.config).await?;
            let listed = providers::list_providers(&store).await;
            store.close().await;
            for p in listed? {
                println!(
                    "{}\t{}\t{}",
                    p.provider_id,
                    p.base_url,
                    p.updated_at.to_rfc3339()
                );
            }
        }
        Command::Secrets(SecretsCommand::GenerateKey) => println!("{}", config::generate_key()?),
        Command::Secrets(SecretsCommand::Reseal) => {
            let store = open_migrated(&cli.config).await?;
            let resealed = store.reseal_provider_tokens().await;
            let signing_key = match resealed {
                Ok(_) => Some(
                    store
                        .reseal_secret_setting(grants::SIGNING_KEY_SETTING)
                        .await,
                ),
                Err(_) => None,
            };
            store.close().await;
            let key = cli.config.sealer()?.current_key_id().map(str::to_owned);
            let under = key.map_or("stored as given (no key)".to_owned(), |k| {
                format!("sealed under key {k}")
            });
            println!("{} provider tokens rewritten; all are {under}", resealed?);
            if let Some(rewritten) = signing_key.transpose()? {
                let n = u8::from(rewritten);
                println!("{n} stored grant signing keys rewritten; any is {under}");
            }
        }
        Command::Provider(ProviderCommand::Check { url, token_file }) => {
            let token = match token_file {
                Some(path) => Some(read_token(&path)?),
                None => None,
            };
            let signer = grants::configured(&cli.config)?;
            let results = conformance::run_checks_with(&url, token.as_deref(), signer).await;
            if !conformance::print_report(&results) {
                anyhow::bail!("the provider at {url} does not conform to plugin API v3");
            }
        }
        Command::Grant(GrantCommand::PublicKey) => {
            let signer = match grants::configured(&cli.config)? {
                Some(signer) => signer,
                None => {
                    let store = open_migrated(&cli.config).await?;
                    let signer = grants::signer(&cli.config, &store).await;
                    store.close().await;
                    signer?
                }
            };
            let public = signer.verifier().public_key_text().context(
                "grants are signed with a shared secret (SAGENTS_GRANT_SECRET): there is no public key",
            )?;
            println!("{public}");
        }
        Command::Grant(GrantCommand::GenerateKey) => {
            println!(
                "{}",
                grants::generate().private_key_text().unwrap_or_default()
            );
        }
    }
    Ok(())
}

fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let token =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(token.trim().to_owned())
}

async fn open_migrated(config: &Config) -> anyhow::Result<Store> {
    let store = open_store(config).await?;
    store.migrate().await.context("migration failed")?;
    Ok(store)
}

async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    config.check_secrets()?;
    let sealer = config.sealer()?;
    let store = Store::connect(
        &config.database_url,
        clock,
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .with_context(|| format!("cannot open the database {}", config.database_url))?;
    store.use_sealer(sealer);
    Ok(store)
}
