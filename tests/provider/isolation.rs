//! Sandboxes in their own namespaces: a command sees its own files and nothing of the
//! provider, other sandboxes or the network; a terminate leaves no process behind.

use super::*;
use sagents::providers::wire_spec::NetworkMode;

#[tokio::test]
async fn a_sandbox_sees_its_own_files_and_nothing_of_the_provider() {
    let h = Harness::start().await;
    let caps = h
        .client
        .capabilities(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(caps.isolation_level, "namespaces");
    let a = h.provision("a").await;
    let b = h.provision("b").await;
    h.sh(&b, "echo b-secret > mine.txt").await.unwrap();
    let out = h
        .sh(&a, "echo mine > own.txt && cat own.txt && pwd && id -u")
        .await
        .unwrap();
    assert_eq!(out.stdout, "mine\n/workspace\n0\n", "{out:?}");

    let root = h.root.path().canonicalize().unwrap();
    let b_dir = root.join("sandboxes").join(&b.r#ref.sandbox_id);
    assert!(b_dir.join("mine.txt").exists());
    let secret = root.join("state/grant-secret");
    std::fs::write(&secret, "on-disk-secret").unwrap();
    let provider_pid = std::process::id();
    let probes = [
        format!("cat {}/mine.txt", b_dir.display()),
        format!("cat ../{}/mine.txt", b.r#ref.sandbox_id),
        format!("ls {}", root.display()),
        format!("cat {}", secret.display()),
        format!("cat /proc/{provider_pid}/environ"),
        format!("cat /proc/{provider_pid}/cmdline"),
    ];
    for probe in &probes {
        let out = h.sh(&a, probe).await.unwrap();
        assert_ne!(out.exit_code, Some(0), "{probe} succeeded: {out:?}");
        assert!(!out.stdout.contains("secret"), "{probe}: {out:?}");
    }
    // Its /proc shows only its own namespace: the init, the leader, the shell and `ls`'s pid.
    let out = h
        .sh(
            &a,
            "ls /proc | grep -c '^[0-9]'; cat /proc/self/status | grep NoNewPrivs",
        )
        .await
        .unwrap();
    let count: u32 = out.stdout.lines().next().unwrap().parse().unwrap();
    assert!(count <= 6, "{out:?}");
    assert!(out.stdout.contains("NoNewPrivs:\t1"), "{out:?}");
    // System folders are read-only; /tmp is private to the sandbox.
    let out = h
        .sh(
            &a,
            "touch /usr/x 2>/dev/null || echo ro; echo t > /tmp/t && cat /tmp/t",
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "ro\nt\n");
    assert!(!std::path::Path::new("/tmp/t").exists() || std::fs::read("/tmp/t").unwrap() != b"t\n");
    let out = h.sh(&b, "cat /tmp/t").await.unwrap();
    assert_ne!(out.exit_code, Some(0));
}

async fn listener() -> (tokio::net::TcpListener, u16) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn connect_script(port: u16) -> String {
    // bash's /dev/tcp: a connection attempt with no client tool needed.
    format!(
        "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected || echo refused"
    )
}

#[tokio::test]
async fn without_network_a_sandbox_cannot_reach_the_host() {
    let h = Harness::with(|c| c.allow_host_network = true).await;
    let (l, port) = listener().await;
    let accept = tokio::spawn(async move { l.accept().await.is_ok() });
    let none = h.provision("none").await;
    let out = h.sh(&none, &connect_script(port)).await.unwrap();
    assert_eq!(out.stdout, "refused\n", "{out:?}");
    assert!(!accept.is_finished());

    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources.network = Some(NetworkMode::Host);
    let host = h.provision_spec("host", s).await.unwrap();
    let out = h.sh(&host, &connect_script(port)).await.unwrap();
    assert_eq!(out.stdout, "connected\n", "{out:?}");
    assert!(accept.await.unwrap());
}

/// Host pids of live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && proc_state(pid).is_some() {
            out.push(pid);
        }
    }
    out
}

/// The processes running `needle`, once a background start has got as far as `exec`.
async fn started(needle: &str) -> Vec<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let pids = processes_with(needle);
        if !pids.is_empty() || std::time::Instant::now() > deadline {
            return pids;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_terminate_leaves_no_process_behind_setsid_or_double_fork() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    // Distinct durations name this test's processes on the host.
    let out = h
        .sh(
            &sbx,
            "setsid sleep 7301 >/dev/null 2>&1 & (sleep 7302 >/dev/null 2>&1 &) ; \
             nohup sleep 7303 >/dev/null 2>&1 & echo started",
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "started\n");
    let mut seen = Vec::new();
    for needle in ["sleep 7301", "sleep 7302", "sleep 7303"] {
        let pids = started(needle).await;
        assert_eq!(pids.len(), 1, "{needle}: {pids:?}");
        seen.extend(pids);
    }
    let receipt = h
        .release(&sbx, ReleaseDisposition::Terminate, "t1")
        .await
        .unwrap();
    assert!(receipt.compute_released);
    for pid in seen {
        assert_eq!(proc_state(pid), None, "pid {pid} survived the terminate");
    }
    for needle in ["sleep 7301", "sleep 7302", "sleep 7303"] {
        assert!(processes_with(needle).is_empty(), "{needle}");
    }
}

#[tokio::test]
async fn snapshot_and_restore_keep_files_and_end_every_process() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    h.sh(
        &sbx,
        "echo kept > notes.txt; setsid sleep 7311 >/dev/null 2>&1 &",
    )
    .await
    .unwrap();
    assert_eq!(started("sleep 7311").await.len(), 1);
    let receipt = h
        .release(&sbx, ReleaseDisposition::SnapshotAndTerminate, "s1")
        .await
        .unwrap();
    assert!(receipt.compute_released);
    assert!(processes_with("sleep 7311").is_empty());
    let restored = h.restore(&receipt.checkpoint.unwrap(), "r1").await.unwrap();
    let out = h
        .sh(&restored, "cat notes.txt; echo more >> notes.txt")
        .await
        .unwrap();
    assert_eq!(out.stdout, "kept\n", "{out:?}");
}

#[tokio::test]
async fn state_is_readable_by_the_provider_alone() {
    use std::os::unix::fs::PermissionsExt;
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    h.sh(&sbx, "echo x > f").await.unwrap();
    let receipt = h
        .release(&sbx, ReleaseDisposition::SnapshotAndTerminate, "s1")
        .await
        .unwrap();
    let ckp = receipt.checkpoint.unwrap();
    let root = h.root.path();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [
        "state",
        "state/sandboxes",
        "state/terminated",
        "checkpoints",
        "blobs",
    ] {
        assert_eq!(mode(&root.join(dir)), 0o700, "{dir}");
    }
    let manifest = root.join(format!("checkpoints/{}.manifest", ckp.checkpoint_id));
    assert_eq!(mode(&manifest), 0o600);
    for prefix in std::fs::read_dir(root.join("blobs")).unwrap().flatten() {
        for blob in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            assert_eq!(mode(&blob.path()), 0o600, "{}", blob.path().display());
        }
    }
    for dir in ["state/terminated", "state/checkpoints"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
        }
    }
}
