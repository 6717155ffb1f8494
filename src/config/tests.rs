//! The settings' defaults, bounds and parsing.

use super::*;
use crate::domain::token::Role;
use clap::Parser;

#[test]
fn debug_never_prints_a_secret() {
    let mut c = Config::with_database("postgres://app:hunter2@db/sagents");
    c.grant_secret = Some("s3cret-grant-key".parse().unwrap());
    let printed = format!("{c:?}");
    assert!(printed.contains("app:***@db"), "{printed}");
    assert!(
        !printed.contains("hunter2") && !printed.contains("s3cret"),
        "{printed}"
    );
    let cli = Cli::try_parse_from([
        "sagents",
        "--database-url",
        "postgres://app:hunter2@db/sagents",
        "--grant-secret",
        "s3cret-grant-key",
        "serve",
    ])
    .unwrap();
    assert_eq!(
        cli.config.grant_secret.as_ref().map(Secret::expose),
        Some("s3cret-grant-key")
    );
    assert!(!format!("{cli:?}").contains("hunter2"));
}

#[test]
fn an_idempotency_key_is_in_flight_no_longer_than_its_request_may_run() {
    let mut c = Config::with_database("sqlite://x");
    assert_eq!(c.request_deadline(), Duration::from_secs(75));
    c.long_poll_max_seconds = 5;
    assert_eq!(c.request_deadline(), Duration::from_secs(20));
}

#[test]
fn defaults_match_the_documented_ones() {
    let cli = Cli::try_parse_from(["sagents", "serve"]).unwrap();
    let d = Config::with_database("sqlite://data/sagents.db");
    assert_eq!(cli.config.database_url, d.database_url);
    assert_eq!(cli.config.listen, d.listen);
    assert_eq!(cli.config.workers, d.workers);
    assert_eq!(cli.config.worker_batch, d.worker_batch);
    assert_eq!(cli.config.lease_ttl_seconds, d.lease_ttl_seconds);
    assert_eq!(
        cli.config.lifecycle_lease_ttl_seconds,
        d.lifecycle_lease_ttl_seconds
    );
    assert_eq!(cli.config.long_poll_max_seconds, d.long_poll_max_seconds);
    assert_eq!(cli.config.body_limit_bytes, d.body_limit_bytes);
    assert_eq!(
        cli.config.request_timeout_seconds,
        d.request_timeout_seconds
    );
    assert_eq!(cli.config.cors_origins, d.cors_origins);
    assert_eq!(cli.config.sse_heartbeat_seconds, d.sse_heartbeat_seconds);
    assert_eq!(
        cli.config.sse_max_streams_per_token,
        d.sse_max_streams_per_token
    );
    assert_eq!(cli.config.release_attempt_budget, d.release_attempt_budget);
    assert_eq!(
        cli.config.attention_retry_seconds,
        d.attention_retry_seconds
    );
    assert_eq!(
        cli.config.reconcile_interval_seconds,
        d.reconcile_interval_seconds
    );
    assert_eq!(
        cli.config.checkpoint_grace_seconds,
        d.checkpoint_grace_seconds
    );
    assert_eq!(
        cli.config.provider_release_timeout_seconds,
        d.provider_release_timeout_seconds
    );
    assert_eq!(
        cli.config.provider_restore_timeout_seconds,
        d.provider_restore_timeout_seconds
    );
    assert_eq!(
        cli.config.provider_provision_timeout_seconds,
        d.provider_provision_timeout_seconds
    );
    assert_eq!(
        cli.config.provider_attach_timeout_seconds,
        d.provider_attach_timeout_seconds
    );
    assert_eq!(d.check_settings(), Ok(()));
    assert_eq!(cli.config.log_format, LogFormat::Pretty);
    assert!(cli.config.grant_secret.is_none());
    assert!(cli.config.grant_signing_key.is_none());
}

#[test]
fn provider_timeouts_are_bounded_and_the_checkpoint_grace_outlives_a_release() {
    let parse = |args: &[&str]| Cli::try_parse_from([&["sagents"], args, &["serve"]].concat());
    for flag in [
        "--provider-release-timeout-seconds",
        "--provider-restore-timeout-seconds",
        "--provider-provision-timeout-seconds",
        "--provider-attach-timeout-seconds",
    ] {
        assert!(parse(&[flag, "0"]).is_err(), "{flag} 0");
        assert!(parse(&[flag, "3601"]).is_err(), "{flag} 3601");
        assert!(parse(&[flag, "abc"]).is_err(), "{flag} abc");
        assert!(parse(&[flag, "1"]).is_ok(), "{flag} 1");
        assert!(parse(&[flag, "3600"]).is_ok(), "{flag} 3600");
    }
    let cli = parse(&["--provider-release-timeout-seconds", "45"]).unwrap();
    assert_eq!(
        cli.config.provider_release_timeout(),
        Duration::from_secs(45)
    );
    assert!(parse(&["--checkpoint-grace-seconds", "0"]).is_err());
    assert!(parse(&["--checkpoint-grace-seconds", "599"]).is_err());

    let cli = parse(&[
        "--provider-release-timeout-seconds",
        "900",
        "--checkpoint-grace-seconds",
        "1000",
    ])
    .unwrap();
    assert_eq!(cli.config.checkpoint_grace_floor(), 1800);
    let e = cli.config.check_settings().unwrap_err();
    assert!(
        e.to_string()
            .contains("SAGENTS_CHECKPOINT_GRACE_SECONDS is 1000, below 1800"),
        "{e}"
    );
    let mut c = cli.config;
    c.checkpoint_grace_seconds = 1800;
    assert_eq!(c.check_settings(), Ok(()));
    c.provider_release_timeout_seconds = 60;
    c.checkpoint_grace_seconds = 600;
    assert_eq!(c.checkpoint_grace_floor(), CHECKPOINT_GRACE_FLOOR);
    assert_eq!(c.check_settings(), Ok(()));
}

#[test]
fn a_signing_key_comes_from_the_flag_or_a_file() {
    let parse = |args: &[&str]| Cli::try_parse_from([&["sagents"], args].concat());
    assert!(parse(&["--grant-signing-key-file", "/k", "grant", "public-key"]).is_ok());
    assert!(parse(&[
        "--grant-signing-key",
        "k",
        "--grant-signing-key-file",
        "/k",
        "serve"
    ])
    .is_err());
}

#[test]
fn flags_after_the_subcommand_and_token_arguments() {
    let cli = Cli::try_parse_from([
        "sagents",
        "token",
        "create",
        "--role",
        "runtime",
        "--tenant",
        "acme",
        "--database-url",
        "postgres://x/y",
    ])
    .unwrap();
    assert_eq!(&*cli.config.database_url, "postgres://x/y");
    match cli.command {
        Command::Token(TokenCommand::Create { role, tenant, .. }) => {
            assert_eq!(Role::from(role), Role::Runtime);
            assert_eq!(tenant.as_deref(), Some("acme"));
        }
        other => panic!("unexpected command {other:?}"),
    }
    assert!(Cli::try_parse_from(["sagents", "token", "create", "--role", "root"]).is_err());
    assert!(Cli::try_parse_from(["sagents", "serve", "--workers", "0"]).is_err());
    assert!(Cli::try_parse_from(["sagents", "serve", "--log-format", "json"]).is_ok());
}
