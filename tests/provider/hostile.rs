//! A tenant holding one grant plays attacker against the reference provider with real
//! namespaces: nothing it sends reaches a host process, and inside it holds no capability,
//! creates no namespace and mounts nothing.

use std::collections::BTreeMap;

use super::*;

fn with_env(script: &str, env: &[(&str, &str)]) -> ExecRequest {
    ExecRequest {
        env: Some(
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..exec_req(script)
    }
}

/// A folder on the host that no sandbox sees, writable by any uid: a planted program that
/// ran on the host would leave its mark here.
fn host_marker(h: &Harness) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = h.root.path().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir.join("marker")
}

#[tokio::test]
async fn a_planted_helper_on_the_callers_path_never_runs_on_the_host() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let marker = host_marker(&h);
    let host_dir = h
        .root
        .path()
        .canonicalize()
        .unwrap()
        .join("sandboxes")
        .join(&sbx.r#ref.sandbox_id);
    // Every host helper the provider has used, planted under the sandbox's own folder.
    let plant = format!(
        "mkdir -p bin && for p in nsenter setpriv env bwrap sh; do \
         printf '#!/bin/sh\\nid -u > {m}\\nexec /usr/bin/$(basename $0) \"$@\"\\n' > bin/$p; \
         chmod +x bin/$p; done; echo planted",
        m = marker.display()
    );
    assert_eq!(h.sh(&sbx, &plant).await.unwrap().stdout, "planted\n");
    assert!(host_dir.join("bin/nsenter").exists());
    let grant = sbx.grant.clone().unwrap().token;
    let path = format!("{}/bin:/workspace/bin:/usr/bin:/bin", host_dir.display());
    let out = h
        .exec(&sbx, &grant, with_env("echo \"$PATH\"", &[("PATH", &path)]))
        .await
        .unwrap();
    // The caller's PATH reaches its command, inside the sandbox, and nothing on the host.
    assert_eq!(out.stdout, format!("{path}\n"), "{out:?}");
    assert!(
        !marker.exists(),
        "a planted helper ran on the host: {:?}",
        std::fs::read_to_string(&marker)
    );
}

#[tokio::test]
async fn loader_variables_and_malformed_names_are_refused() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let grant = sbx.grant.clone().unwrap().token;
    h.sh(&sbx, "echo not-a-library > evil.so").await.unwrap();
    for (name, value) in [
        ("LD_PRELOAD", "/workspace/evil.so"),
        ("LD_LIBRARY_PATH", "/workspace"),
        ("LD_AUDIT", "/workspace/evil.so"),
        ("SAGENTS_SANDBOX_ID", "sbx_of_another_tenant"),
        ("A=B", "x"),
        ("1X", "x"),
        ("", "x"),
        ("SP ACE", "x"),
        ("NUL", "a\0b"),
    ] {
        let (status, code) = refused(
            h.exec(&sbx, &grant, with_env("echo ran", &[(name, value)]))
                .await,
        );
        assert_eq!(
            (status, code.as_str()),
            (422, "validation.failed"),
            "{name}"
        );
    }
    // A well-formed variable is the command's, and only the command's.
    let out = h
        .exec(
            &sbx,
            &grant,
            with_env(
                "echo \"$GREETING $_X1\"",
                &[("GREETING", "hi"), ("_X1", "y")],
            ),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "hi y\n", "{out:?}");
    // A program named like an assignment would be read as one by `env`.
    let req = ExecRequest {
        argv: vec!["X=1".into()],
        ..exec_req("")
    };
    assert_eq!(refused(h.exec(&sbx, &grant, req).await).0, 422);
}

#[tokio::test]
async fn commands_hold_no_capability_create_no_namespace_and_mount_nothing() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let out = h
        .sh(&sbx, "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status")
        .await
        .unwrap();
    for line in out.stdout.lines() {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert_eq!(out.stdout.lines().count(), 4, "{out:?}");
    for probe in [
        "unshare -U true",
        "unshare -Ur true",
        "unshare -U -m -p -f true",
        "unshare -p -f true",
        "unshare -m true",
        "mkdir -p m && mount -t tmpfs none m",
        "mount --bind /workspace /tmp",
        "chroot / true",
    ] {
        let out = h.sh(&sbx, probe).await.unwrap();
        assert_ne!(out.exit_code, Some(0), "{probe} succeeded: {out:?}");
    }
    // The probes were refused by the kernel, not missing: plain commands still run.
    let out = h
        .sh(&sbx, "unshare --help >/dev/null && echo ok")
        .await
        .unwrap();
    assert_eq!(out.stdout, "ok\n");
}

#[tokio::test]
async fn kernel_interfaces_outside_the_sandboxs_needs_are_refused() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    // `perl` makes the raw calls: keyctl, bpf, userfaultfd, perf_event_open, ptrace.
    let script = r#"perl -e '
        require "syscall.ph";
        for my $c (["keyctl", &SYS_keyctl, 0, 0, 0], ["bpf", &SYS_bpf, 0, 0, 0],
                   ["userfaultfd", &SYS_userfaultfd, 0, 0, 0],
                   ["perf_event_open", &SYS_perf_event_open, 0, 0, 0],
                   ["ptrace", &SYS_ptrace, 0, 1, 0]) {
            my ($n, @a) = @$c; $! = 0;
            my $r = syscall($a[0], @a[1 .. $#a]); my $e = $! + 0;
            print "$n ", ($r == -1 && $e == 1 ? "refused" : "allowed:$r:$e"), "\n";
        }' 2>&1"#;
    let out = h.sh(&sbx, script).await.unwrap();
    assert!(
        !out.stdout.contains("Can't locate"),
        "perl lacks syscall.ph: {out:?}"
    );
    for name in ["keyctl", "bpf", "userfaultfd", "perf_event_open", "ptrace"] {
        assert!(
            out.stdout.contains(&format!("{name} refused")),
            "{name}: {out:?}"
        );
    }
}
