//! Reference sandbox provider: `sagents-local-provider serve --listen ADDR --root DIR ...`.
#![allow(clippy::print_stdout, reason = "the CLI answers on stdout")]

use anyhow::Context;
use clap::Parser;
use sagents_local_provider::{self as local_provider, cli};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match cli.command {
        cli::Command::Serve(args) => {
            let config = args
                .into_config()
                .context("reading the provider's secrets")?;
            let auth = if config.insecure_no_auth && config.token.is_none() {
                "none (--insecure-no-auth)"
            } else {
                "token"
            };
            let provider = local_provider::serve(config)
                .await
                .context("starting the local provider")?;
            tracing::info!(addr = %provider.addr, auth, "sagents-local-provider listening");
            println!("listening on {}", provider.addr);
            provider.wait_for_signal().await;
        }
    }
    Ok(())
}
