//! The operator's commands beside `serve`: tokens created with a role and a lifetime, listed
//! and revoked; providers registered from a token file and listed, never showing a secret;
//! stored provider tokens sealed under a key given later.

use std::process::{Command, Stdio};

use crate::provider::Harness;

const PROVIDER_TOKEN: &str = "provider-secret-in-a-file-0123456789";

fn sagents(db: &str, args: &[&str]) -> (bool, String, String) {
    sagents_with(db, &[], args)
}

/// Runs the `sagents` binary against `db` with `env`: (success, stdout, stderr).
pub(super) fn sagents_with(
    db: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sagents"))
        .args(args)
        .envs(env.iter().copied())
        .env("SAGENTS_DATABASE_URL", db)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn register_args<'a>(url: &'a str, token_file: &'a str) -> [&'a str; 8] {
    let id = "local";
    [
        "provider",
        "register",
        "--id",
        id,
        "--url",
        url,
        "--token-file",
        token_file,
    ]
}

fn ok(db: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = sagents(db, args);
    assert!(success, "sagents {args:?}: {stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_providers_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/sagents.db", dir.path().display());

    let secret = ok(&db, &["token", "create", "--role", "metrics"]);
    assert!(secret.trim().starts_with("sag_"));
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(secret.trim().as_bytes()));
    let stored = crate::common::db::column_text(&db, "tokens", "secret_hash").await;
    assert_eq!(stored, vec![digest], "only the digest is stored");
    ok(
        &db,
        &[
            "token",
            "create",
            "--role",
            "frontend",
            "--tenant",
            "acme",
            "--ttl-seconds",
            "3600",
            "--name",
            "Ann Example",
        ],
    );
    let (refused, _, stderr) = sagents(&db, &["token", "create", "--role", "admin", "--name", ""]);
    assert!(!refused && stderr.contains("name"), "{stderr}");
    let (refused, _, stderr) = sagents(
        &db,
        &["token", "create", "--role", "metrics", "--tenant", "acme"],
    );
    assert!(
        !refused && stderr.contains("not bound to a tenant"),
        "{stderr}"
    );
    let (refused, _, _) = sagents(
        &db,
        &["token", "create", "--role", "admin", "--ttl-seconds", "0"],
    );
    assert!(!refused, "a lifetime must be positive");

    let listed = ok(&db, &["token", "list"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert!(!listed.contains("sag_"), "no secret is listed");
    let metrics = lines.iter().find(|l| l.contains("\tmetrics\t")).unwrap();
    assert!(
        metrics.contains("\t-\t") && metrics.ends_with("active\t-"),
        "{metrics}"
    );
    let frontend = lines.iter().find(|l| l.contains("\tfrontend\t")).unwrap();
    assert!(
        frontend.contains("\tacme\t")
            && frontend.contains("expires ")
            && frontend.ends_with("\tAnn Example"),
        "{frontend}"
    );

    let id = metrics.split('\t').next().unwrap();
    assert!(ok(&db, &["token", "revoke", id]).contains("revoked "));
    assert!(ok(&db, &["token", "list"])
        .lines()
        .any(|l| l.starts_with(id) && l.contains("revoked ")));
    let (unknown, _, _) = sagents(
        &db,
        &["token", "revoke", "tok_0192f0c1a2b37c4d8e9f0a1b2c3d4e5f"],
    );
    assert!(!unknown);

    let provider = Harness::with(|c| c.token = Some(PROVIDER_TOKEN.into())).await;
    let token_file = dir.path().join("provider-token");
    std::fs::write(&token_file, format!("{PROVIDER_TOKEN}\n")).unwrap();
    let url = provider.base_url();
    let file = token_file.to_string_lossy();
    let register = register_args(&url, &file);
    let registered = ok(&db, &register);
    assert!(registered.contains("registered local"), "{registered}");
    let providers = ok(&db, &["provider", "list"]);
    assert!(
        providers.starts_with("local\t") && providers.contains(&url),
        "{providers}"
    );
    assert!(!providers.contains(PROVIDER_TOKEN));

    std::fs::write(&token_file, "a-wrong-token").unwrap();
    let (refused, _, stderr) = sagents(&db, &register);
    assert!(!refused, "the provider refuses a wrong token: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_stored_before_a_key_was_set_are_sealed_by_a_reseal() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/sagents.db", dir.path().display());
    let provider = Harness::with(|c| c.token = Some(PROVIDER_TOKEN.into())).await;
    let token_file = dir.path().join("provider-token");
    std::fs::write(&token_file, PROVIDER_TOKEN).unwrap();
    let (url, file) = (provider.base_url(), token_file.to_string_lossy());
    let register = [
        "provider",
        "register",
        "--id",
        "local",
        "--url",
        &url,
        "--token-file",
        &file,
    ];
    ok(&db, &register);
    let at_rest = crate::common::db::column_text(&db, "providers", "token").await;
    assert_eq!(
        at_rest,
        vec![PROVIDER_TOKEN.to_owned()],
        "no key: stored as given"
    );

    let key = ok(&db, &["secrets", "generate-key"]);
    assert_eq!(key.trim().len(), 44, "32 bytes in base64: {key}");
    let key_file = dir.path().join("secret-keys");
    std::fs::write(&key_file, &key).unwrap();
    let with_key = [("SAGENTS_SECRET_KEY_FILE", key_file.to_str().unwrap())];
    let (done, resealed, stderr) = sagents_with(&db, &with_key, &["secrets", "reseal"]);
    assert!(done, "{stderr}");
    assert!(resealed.starts_with("1 provider tokens rewritten; all are sealed under key "));
    let at_rest = crate::common::db::column_text(&db, "providers", "token").await;
    assert!(at_rest[0].starts_with("sealed:v1:") && !at_rest[0].contains(PROVIDER_TOKEN));
    let (listed, providers, _) = sagents_with(&db, &with_key, &["provider", "list"]);
    assert!(listed && providers.starts_with("local\t"), "{providers}");
    let (done, again, _) = sagents_with(&db, &with_key, &["secrets", "reseal"]);
    assert!(
        done && again.starts_with("0 provider tokens rewritten"),
        "{again}"
    );

    // Without the key the providers are still listed (a listing never shows a token); using
    // one is what needs the key.
    let (listed, providers, stderr) = sagents(&db, &["provider", "list"]);
    assert!(listed && providers.starts_with("local\t"), "{stderr}");
    let (checked, _, stderr) = sagents(&db, &["secrets", "reseal"]);
    assert!(!checked && stderr.contains("not configured"), "{stderr}");
    let bad = [("SAGENTS_SECRET_KEY", "too-short")];
    let (refused, _, stderr) = sagents_with(&db, &bad, &["provider", "list"]);
    assert!(
        !refused && stderr.contains("32 bytes in base64"),
        "{stderr}"
    );
}
