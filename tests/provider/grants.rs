//! Exec is authorized by a grant alone, sent as the bearer token; the provider holds only the
//! service's Ed25519 public key, so it checks grants but cannot mint them.

use chrono::{Duration, Utc};
use reqwest::StatusCode;
use sagents::providers::grant::GrantSigner;
use sagents::providers::wire::SandboxHandle;
use sagents::providers::wire_spec::ReleaseDisposition as D;
use serde_json::{json, Value};

use super::{release_req, Harness};

const TOKEN: &str = "provider-service-token-0123456789abc";

struct Fixture {
    h: Harness,
    signer: GrantSigner,
    http: reqwest::Client,
}

async fn fixture() -> Fixture {
    let signer = GrantSigner::ed25519(&[42; 32]);
    let public = signer.verifier().public_key_text();
    let h = Harness::with(move |c| {
        c.token = Some(TOKEN.into());
        c.grant_secret = None;
        c.grant_public_key = public;
    })
    .await;
    Fixture {
        h,
        signer,
        http: reqwest::Client::new(),
    }
}

impl Fixture {
    fn grant(&self, h: &SandboxHandle, generation: u64, ttl: Duration) -> String {
        let id = &h.r#ref.sandbox_id;
        self.signer
            .mint("local", id, generation, Utc::now() + ttl)
            .token
    }

    /// POSTs `body` to the sandbox's exec with `bearer`: the status and the JSON answer.
    async fn exec_as(&self, id: &str, bearer: Option<&str>, body: Value) -> (StatusCode, Value) {
        let url = format!("{}/v3/sandboxes/{id}/exec", self.h.base_url());
        let mut rb = self.http.post(url).json(&body);
        if let Some(b) = bearer {
            rb = rb.bearer_auth(b);
        }
        let resp = rb.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap())
    }
}

fn echo(word: &str) -> Value {
    json!({"argv": ["echo", word], "timeout_seconds": 10})
}

fn refusal(answer: (StatusCode, Value)) -> (u16, String) {
    let (status, body) = answer;
    assert_eq!(body["retryable"], false, "{body}");
    (
        status.as_u16(),
        body["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn exec_runs_with_the_grant_alone_and_never_with_the_service_token() {
    let f = fixture().await;
    let sbx = f.h.provision("p1").await;
    assert!(
        sbx.grant.is_none(),
        "a provider with only the public key mints no grant"
    );
    let id = sbx.r#ref.sandbox_id.clone();
    let grant = f.grant(&sbx, sbx.generation, Duration::minutes(5));

    let (status, out) = f.exec_as(&id, Some(&grant), echo("hi")).await;
    assert_eq!(
        (status, out["stdout"].clone()),
        (StatusCode::OK, json!("hi\n"))
    );

    let service = f.exec_as(&id, Some(TOKEN), echo("no")).await;
    assert_eq!(refusal(service), (403, "grant.required".into()));
    let anonymous = f.exec_as(&id, None, echo("no")).await;
    assert_eq!(refusal(anonymous), (401, "grant.required".into()));
    // The former shape: the grant in the body, the service token in the header.
    let mut old = echo("no");
    old["grant"] = json!(grant);
    assert_eq!(
        refusal(f.exec_as(&id, Some(TOKEN), old.clone()).await),
        (403, "grant.required".into())
    );
    let (status, body) = f.exec_as(&id, Some(&grant), old).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

#[tokio::test]
async fn grants_of_another_sandbox_generation_key_or_time_are_refused() {
    let f = fixture().await;
    let sbx = f.h.provision("p1").await;
    let other = f.h.provision("p2").await;
    let id = sbx.r#ref.sandbox_id.clone();
    let g = sbx.generation;
    let stranger = GrantSigner::ed25519(&[7; 32]);
    let cases = [
        (
            "another sandbox",
            f.grant(&other, other.generation, Duration::minutes(5)),
        ),
        (
            "an old generation",
            f.grant(&sbx, g - 1, Duration::minutes(5)),
        ),
        (
            "a later generation",
            f.grant(&sbx, g + 1, Duration::minutes(5)),
        ),
        ("expired", f.grant(&sbx, g, Duration::seconds(-1))),
        (
            "another key",
            stranger
                .mint("local", &id, g, Utc::now() + Duration::minutes(5))
                .token,
        ),
        (
            "a shared-secret grant",
            GrantSigner::hmac(b"guess")
                .mint("local", &id, g, Utc::now() + Duration::minutes(5))
                .token,
        ),
        ("garbage", "sgr2.garbage.garbage".to_owned()),
    ];
    for (what, grant) in cases {
        assert_eq!(
            refusal(f.exec_as(&id, Some(&grant), echo("no")).await),
            (403, "grant.invalid".into()),
            "{what}"
        );
    }

    let grant = f.grant(&sbx, g, Duration::minutes(5));
    f.h.release(&sbx, D::Terminate, "t").await.unwrap();
    assert_eq!(
        refusal(f.exec_as(&id, Some(&grant), echo("no")).await),
        (403, "grant.refused".into()),
        "terminated compute"
    );
}

#[tokio::test]
async fn a_grant_opens_no_route_but_exec() {
    let f = fixture().await;
    let sbx = f.h.provision("p1").await;
    let id = sbx.r#ref.sandbox_id.clone();
    let grant = f.grant(&sbx, sbx.generation, Duration::minutes(5));
    let base = f.h.base_url();
    let release = serde_json::to_value(release_req(&sbx, D::Terminate, "r")).unwrap();
    let provision = json!({"spec": super::spec(sagents::providers::wire_spec::WorkspaceMode::Isolated, None), "owner_run_id": "r",
                           "tenant_id": "acme", "idempotency_key": "k2"});
    let calls = [
        f.http
            .post(format!("{base}/v3/sandboxes/{id}/release"))
            .json(&release),
        f.http.post(format!("{base}/v3/sandboxes")).json(&provision),
        f.http.get(format!("{base}/v3/sandboxes/{id}")),
        f.http.get(format!("{base}/v3/sandboxes")),
        f.http.get(format!("{base}/v3/checkpoints")),
        f.http.post(format!("{base}/v3/restores")).json(&json!({})),
        f.http.delete(format!("{base}/v3/checkpoints/ckp_x")),
    ];
    for call in calls {
        let resp = call.bearer_auth(&grant).send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            (status, body["code"].clone()),
            (403, json!("grant.not_accepted"))
        );
    }
    assert_eq!(
        f.h.sandbox_state(&id).await,
        sagents::providers::wire::SandboxState::Ready,
        "the release sent with a grant did nothing"
    );
}

#[tokio::test]
async fn a_provider_takes_a_public_key_or_a_secret_not_both() {
    let root = tempfile::tempdir().unwrap();
    let mut config = sagents_local_provider::Config::for_root(root.path());
    config.token = Some("provider-token-of-the-key-and-secret-test".into());
    config.grant_secret = Some("grant-secret-of-the-key-and-secret-test".into());
    config.grant_public_key = GrantSigner::ed25519(&[1; 32]).verifier().public_key_text();
    let refused = sagents_local_provider::serve(config.clone()).await.err();
    assert!(
        matches!(
            refused,
            Some(sagents_local_provider::LocalProviderError::GrantKeyAndSecret)
        ),
        "{refused:?}"
    );
    config.grant_secret = None;
    config.grant_public_key = Some("ed25519-priv:AAAA".into());
    let refused = sagents_local_provider::serve(config).await.err();
    assert!(
        matches!(
            refused,
            Some(sagents_local_provider::LocalProviderError::GrantKey(_))
        ),
        "{refused:?}"
    );
}
