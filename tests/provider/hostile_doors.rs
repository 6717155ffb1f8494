//! The provider's doors, tried by a caller that should not get through: no token at all, the
//! host's network, a grant taken to another provider, a slow or flooding HTTP client, and a
//! flood of commands in one sandbox.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use sagents::providers::grant::GrantSigner;
use sagents::providers::wire_spec::NetworkMode;
use sagents_local_provider::LocalProviderError;

#[tokio::test]
async fn a_provider_without_a_token_refuses_to_start_unless_told_to_run_insecure() {
    let root = tempfile::tempdir().unwrap();
    let mut config = Config::for_root(root.path());
    config.grant_secret = Some(GRANT_SECRET.into());
    let refused = local_provider::serve(config.clone()).await.err();
    assert!(
        matches!(refused, Some(LocalProviderError::NoToken)),
        "{refused:?}"
    );
    assert!(
        !root.path().join("state").exists(),
        "a refused start prepared its root"
    );
    config.token = Some(String::new());
    let refused = local_provider::serve(config.clone()).await.err();
    assert!(matches!(refused, Some(LocalProviderError::NoToken)));

    for weak in ["short-token", "change-me-provider-token-0123456789abcdef"] {
        config.token = Some(weak.into());
        let refused = local_provider::serve(config.clone()).await.err();
        assert!(
            matches!(refused, Some(LocalProviderError::WeakSecret("token"))),
            "{weak}: {refused:?}"
        );
    }
    config.token = Some("provider-token-of-the-provider-id-test".into());
    config.grant_secret = Some("change-me-grant-secret-0123456789abcdef".into());
    let refused = local_provider::serve(config.clone()).await.err();
    assert!(matches!(
        refused,
        Some(LocalProviderError::WeakSecret("grant secret"))
    ));
    config.grant_secret = Some(GRANT_SECRET.into());
    config.provider_id = "no spaces".into();
    let refused = local_provider::serve(config.clone()).await.err();
    assert!(matches!(refused, Some(LocalProviderError::ProviderId(_))));

    config.provider_id = "local".into();
    config.token = None;
    config.insecure_no_auth = true;
    let open = local_provider::serve(config).await.unwrap();
    let anyone = ProviderClient::new(&open.base_url(), None).unwrap();
    let caps = anyone.capabilities(&CallOptions::default()).await.unwrap();
    assert!(
        caps.unauthenticated,
        "its capabilities say it serves anyone"
    );
    open.stop_and_kill_sandboxes().await;
}

#[tokio::test]
async fn with_a_token_attach_hands_no_grant_to_an_unauthenticated_caller() {
    let h = Harness::with(|c| {
        c.insecure_no_auth = false;
        c.token = Some("provider-token-0123456789abcdef0123".into());
    })
    .await;
    let caps = h
        .client
        .capabilities(&CallOptions::default())
        .await
        .unwrap();
    assert!(!caps.unauthenticated);
    let sbx = h.provision("p1").await;
    let url = format!(
        "{}/v3/sandboxes/{}/attach",
        h.base_url(),
        sbx.r#ref.sandbox_id
    );
    let body = serde_json::json!({"context": {}});
    let grant = sbx.grant.as_ref().unwrap().token.clone();
    for bearer in [None, Some("guess"), Some(grant.as_str())] {
        let mut req = reqwest::Client::new().post(&url).json(&body);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert!(matches!(status, 401 | 403), "{bearer:?}: {status} {text}");
        assert!(
            !text.contains("sgr1."),
            "{bearer:?}: a grant was handed out"
        );
    }
}

fn host_network() -> ResolvedSandboxSpec {
    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources.network = Some(NetworkMode::Host);
    s
}

#[tokio::test]
async fn the_hosts_network_is_refused_unless_the_provider_allows_it() {
    let h = Harness::start().await;
    let engine = h.provider.as_ref().unwrap().engine().clone();
    let held = engine.resident_sandboxes();
    assert_eq!(
        refused(h.provision_spec("host", host_network()).await),
        (422, "sandbox.host_network_refused".into())
    );
    assert_eq!(
        engine.resident_sandboxes(),
        held,
        "the refusal created a sandbox"
    );

    let sbx = h.provision("p1").await;
    let checkpoint = h
        .release(&sbx, ReleaseDisposition::SnapshotAndTerminate, "snap")
        .await
        .unwrap()
        .checkpoint
        .unwrap();
    let req = RestoreRequest {
        checkpoint: checkpoint.clone(),
        spec: host_network(),
        owner_run_id: "run_test".into(),
        idempotency_key: "r-host".into(),
        context: RequestContext::default(),
    };
    assert_eq!(
        refused(h.client.restore(&req, &CallOptions::default()).await),
        (422, "sandbox.host_network_refused".into())
    );
    // The same restore without the host's network goes through.
    let restored = h.restore(&checkpoint, "r-none").await.unwrap();
    assert_eq!(restored.state, SandboxState::Ready);
}

#[tokio::test]
async fn a_grant_for_one_provider_is_refused_by_another_sharing_its_key() {
    // Provider B serves A's root, so it holds A's sandbox under the same id and generation,
    // and it shares A's grant secret: only the grant's audience tells them apart.
    let a = Harness::with(|c| c.provider_id = "provider-a".into()).await;
    let sbx = a.provision("p1").await;
    let from_a = sbx.grant.as_ref().unwrap().token.clone();
    assert_eq!(a.sh(&sbx, "echo a").await.unwrap().stdout, "a\n");

    let mut config = a.config.clone();
    config.provider_id = "provider-b".into();
    let b = local_provider::serve(config).await.unwrap();
    let b_client = ProviderClient::new(&b.base_url(), None).unwrap();
    let id = &sbx.r#ref.sandbox_id;
    let inspected = b_client.inspect(id, &CallOptions::default()).await.unwrap();
    assert_eq!(inspected.generation, sbx.generation);

    let exec_on_b = |grant: String| {
        let b_client = b_client.clone();
        let id = id.clone();
        async move {
            b_client
                .exec(&id, &grant, &exec_req("echo b"), &CallOptions::default())
                .await
        }
    };
    assert_eq!(
        refused(exec_on_b(from_a.clone()).await),
        (403, "grant.invalid".into())
    );
    let signer = GrantSigner::hmac(GRANT_SECRET.as_bytes());
    let expires = chrono::Utc::now() + chrono::Duration::minutes(5);
    let for_a = signer.mint("provider-a", id, sbx.generation, expires).token;
    assert_eq!(
        refused(exec_on_b(for_a).await),
        (403, "grant.invalid".into())
    );
    let for_b = signer.mint("provider-b", id, sbx.generation, expires).token;
    assert_eq!(exec_on_b(for_b).await.unwrap().stdout, "b\n");
    // A still takes its own grant.
    assert_eq!(
        a.exec(&sbx, &from_a, exec_req("echo a"))
            .await
            .unwrap()
            .stdout,
        "a\n"
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_grant_names_the_provider_it_registered() {
    let ax = crate::lifecycle::fixture::ax(sagents::store::Backend::Sqlite).await;
    let session = ax.app.create_session().await;
    let (_run, claimed) = ax.running_isolated(&session).await;
    let claims = ax
        .app
        .state
        .grants
        .verifier()
        .decode(&claimed.grant)
        .unwrap();
    assert_eq!(claims.audience.as_deref(), Some("local"));
    assert_eq!(ax.sh(&claimed, "echo mine").await, "mine\n");

    // Another provider with the same key serving the same sandbox refuses the grant.
    let mut config = ax.provider.config.clone();
    config.provider_id = "elsewhere".into();
    let other = local_provider::serve(config).await.unwrap();
    let client = ProviderClient::new(&other.base_url(), None).unwrap();
    let out = client
        .exec(
            &claimed.sandbox_id,
            &claimed.grant,
            &exec_req("echo stolen"),
            &CallOptions::default(),
        )
        .await;
    assert_eq!(refused(out), (403, "grant.invalid".into()));
    other.stop().await;
}

/// Reads until the provider closes the connection; how long that took, or `None` if it kept
/// it open past `deadline`.
async fn closed_within(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    deadline: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.checked_sub(started.elapsed())?;
        match tokio::time::timeout(left, rd.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_slow_loris_trickling_half_a_header_is_cut_off() {
    let h = Harness::with(|c| c.header_read_timeout = Duration::from_secs(1)).await;
    let opened = Instant::now();
    let stream = TcpStream::connect(h.provider.as_ref().unwrap().addr)
        .await
        .unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let trickle = tokio::spawn(async move {
        wr.write_all(b"GET /v3/capabilities HTTP/1.1\r\nHost: p\r\nX-Slow: ")
            .await
            .ok()?;
        // One byte every 200 ms: never a whole head, bounded to 15 s.
        for _ in 0..75 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            wr.write_all(b"a").await.ok()?;
        }
        Some(())
    });
    let closed = closed_within(&mut rd, Duration::from_secs(10)).await;
    trickle.abort();
    closed.expect("the provider kept a trickling connection open for 10 s");
    // Not refused outright: cut off once the timeout ran from when it was accepted.
    assert!(
        opened.elapsed() >= Duration::from_millis(900),
        "closed after {:?}",
        opened.elapsed()
    );

    // A silent connection is cut off the same way, and the provider keeps answering.
    let (mut rd, _wr) = TcpStream::connect(h.provider.as_ref().unwrap().addr)
        .await
        .unwrap()
        .into_split();
    assert!(closed_within(&mut rd, Duration::from_secs(10))
        .await
        .is_some());
    assert!(h.client.capabilities(&CallOptions::default()).await.is_ok());
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let h = Harness::with(|c| {
        c.max_connections = 2;
        c.header_read_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = h.provider.as_ref().unwrap().addr;
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let client = ProviderClient::new(&h.base_url(), None).unwrap();
    let mut third = tokio::spawn(async move { client.capabilities(&CallOptions::default()).await });
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut third)
            .await
            .is_err(),
        "a third connection was served while two idle ones held the cap"
    );
    drop(first);
    let answered = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("the waiting connection was not served once a slot freed")
        .unwrap();
    assert!(answered.is_ok(), "{answered:?}");
}

/// A command that marks `started.N` in its workspace, then waits (at most 10 s) for `go`.
fn parked(n: u32) -> ExecRequest {
    exec_req(&format!(
        "touch started.{n}; i=0; while [ ! -f go ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo done"
    ))
}

#[tokio::test]
async fn execs_beyond_a_sandboxs_cap_are_refused_while_another_sandbox_runs() {
    let h = Harness::with(|c| c.max_execs_per_sandbox = 2).await;
    let a = h.provision("a").await;
    let b = h.provision("b").await;
    let a_dir = h.root.path().join("sandboxes").join(&a.r#ref.sandbox_id);
    let grant = a.grant.as_ref().unwrap().token.clone();
    let mut running = Vec::new();
    for n in 0..2 {
        let (client, id, grant) = (h.client.clone(), a.r#ref.sandbox_id.clone(), grant.clone());
        running.push(tokio::spawn(async move {
            client
                .exec(&id, &grant, &parked(n), &CallOptions::default())
                .await
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(a_dir.join("started.0").exists() && a_dir.join("started.1").exists()) {
        assert!(Instant::now() < deadline, "the two commands did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match h.sh(&a, "echo third").await {
        Err(ProviderCallError::Recoverable { status, error }) => {
            assert_eq!((status, error.code.as_str()), (429, "exec.too_many"));
        }
        other => panic!("a third command in the sandbox was not refused: {other:?}"),
    }
    let t = Instant::now();
    assert_eq!(h.sh(&b, "echo other").await.unwrap().stdout, "other\n");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    std::fs::write(a_dir.join("go"), "").unwrap();
    for r in running {
        assert_eq!(r.await.unwrap().unwrap().stdout, "done\n");
    }
    assert_eq!(h.sh(&a, "echo again").await.unwrap().stdout, "again\n");
}
