use std::sync::Arc;

use anyhow::Context;
use clap::Parser;

use sagents::app::Application;
use sagents::clock::{Clock, SystemClock};
use sagents::config::{Cli, Command, Config, ProviderCommand, TokenCommand};
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::providers::conformance;
use sagents::service::tokens::tenant_for;
use sagents::store::Store;
use sagents::{http, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let logs = telemetry::init(cli.config.log_format);
    let result = run(cli, &logs).await;
    // Every line logged until now is written out before the process exits.
    logs.flush();
    result
}

async fn run(cli: Cli, logs: &telemetry::LogGuard) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve => {
            let app = Application::build(cli.config, Arc::new(SystemClock)).await?;
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
            let doc = http::openapi_document();
            println!(
                "{}",
                doc.to_pretty_json()
                    .context("cannot render the OpenAPI document")?
            );
        }
        Command::Token(TokenCommand::Create { role, tenant }) => {
            let role = role.into();
            let tenant = tenant_for(role, tenant.as_deref())?;
            let store = open_store(&cli.config).await?;
            store.migrate().await.context("migration failed")?;
            let (_, secret) = store.create_token(role, tenant.as_deref()).await?;
            store.close().await;
            println!("{secret}");
        }
        Command::Provider(ProviderCommand::Check { url, token }) => {
            let results = conformance::run_checks(&url, token.as_deref()).await;
            if !conformance::print_report(&results) {
                anyhow::bail!("the provider at {url} does not conform to plugin API v3");
            }
        }
    }
    Ok(())
}

async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    Store::connect(
        &config.database_url,
        clock,
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .with_context(|| format!("cannot open the database {}", redact(&config.database_url)))
}

/// Hides a password in a database URL before it is printed.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}
