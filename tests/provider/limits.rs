//! Exec inside a sandbox: path escapes, rlimits, timeouts, output caps, stdin and env.

use super::*;
use sagents::providers::wire_spec::Resources;

fn with_cwd(script: &str, cwd: &str) -> ExecRequest {
    ExecRequest {
        cwd: Some(cwd.into()),
        ..exec_req(script)
    }
}

#[tokio::test]
async fn cwd_cannot_escape_the_sandbox() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let grant = sbx.grant.clone().unwrap().token;
    h.sh(&sbx, "mkdir sub && ln -s / escape && ln -s sub inside")
        .await
        .unwrap();
    let out = h
        .exec(&sbx, &grant, with_cwd("pwd", "inside"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "/workspace/sub\n");
    for cwd in ["..", "sub/../..", "/etc", "escape", "missing"] {
        assert_eq!(
            refused(h.exec(&sbx, &grant, with_cwd("pwd", cwd)).await),
            (422, "exec.cwd_invalid".into()),
            "{cwd}"
        );
    }
}

#[tokio::test]
async fn the_spec_resources_become_rlimits() {
    let h = Harness::start().await;
    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources = Resources {
        cpu_percent: Some(50),
        memory_mb: Some(256),
        max_processes: Some(64),
        max_open_files: Some(100),
        disk_mb: Some(1),
        ..Resources::default()
    };
    let sbx = h.provision_spec("p1", s).await.unwrap();
    let out = h.sh(&sbx, "cat /proc/self/limits").await.unwrap();
    let limit = |name: &str| -> Vec<String> {
        let line = out.stdout.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len()..]
            .split_whitespace()
            .take(2)
            .map(str::to_owned)
            .collect()
    };
    // 50% of the 20 s timeout in CPU seconds, 256 MiB, 64 processes; soft and hard alike.
    assert_eq!(limit("Max cpu time"), ["10", "10"]);
    assert_eq!(limit("Max address space"), ["268435456", "268435456"]);
    assert_eq!(limit("Max processes"), ["64", "64"]);
    assert_eq!(limit("Max open files"), ["100", "100"]);
    assert_eq!(limit("Max file size"), ["1048576", "1048576"]);
    // A write past the disk quota fails; once the files fill it, commands are refused.
    let out = h
        .sh(&sbx, "head -c 2000000 /dev/zero > big; echo $?")
        .await
        .unwrap();
    assert_ne!(out.stdout.trim(), "0", "{out:?}");
    assert_eq!(
        refused(h.sh(&sbx, "true").await),
        (409, "sandbox.disk_quota_exceeded".into())
    );
}

#[tokio::test]
async fn a_cpu_budget_is_enforced() {
    let h = Harness::start().await;
    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources.cpu_percent = Some(5);
    let sbx = h.provision_spec("p1", s).await.unwrap();
    // A busy loop for 3 s of wall time gets about 5% of a CPU (the cgroup's share), far from
    // the whole CPU it takes unbounded; its CPU time in clock ticks (100 a second).
    let out = h
        .sh(
            &sbx,
            "sh -c 'while :; do :; done' & p=$!; sleep 3; \
             set -- $(cut -d' ' -f14,15 /proc/$p/stat); kill $p; echo $(( $1 + $2 ))",
        )
        .await
        .unwrap();
    let ticks: u64 = out.stdout.trim().parse().expect("CPU ticks");
    assert!(ticks <= 30, "{ticks} ticks of CPU in 3 s at 5%: {out:?}");
}

#[tokio::test]
async fn timeouts_and_output_caps_bound_a_command() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let grant = sbx.grant.clone().unwrap().token;
    let started = std::time::Instant::now();
    let out = h
        .exec(
            &sbx,
            &grant,
            ExecRequest {
                timeout_seconds: 1,
                ..exec_req("sleep 30")
            },
        )
        .await
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    let out = h
        .sh(&sbx, "head -c 200000 /dev/zero | tr '\\0' a; echo err >&2")
        .await
        .unwrap();
    assert!(out.truncated);
    assert_eq!(
        out.stdout.len(),
        sagents_local_provider::exec::MAX_OUTPUT_BYTES
    );
    assert_eq!(out.stderr, "err\n");
    assert_eq!(out.exit_code, Some(0));

    let zero = ExecRequest {
        timeout_seconds: 0,
        ..exec_req("true")
    };
    assert_eq!(refused(h.exec(&sbx, &grant, zero).await).0, 422);
    let empty = ExecRequest {
        argv: vec![],
        ..exec_req("true")
    };
    assert_eq!(refused(h.exec(&sbx, &grant, empty).await).0, 422);
}

#[tokio::test]
async fn stdin_env_and_exit_codes_pass_through() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let grant = sbx.grant.clone().unwrap().token;
    let req = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "cat; echo \" $GREETING\"; exit 3".into(),
        ],
        env: Some([("GREETING".to_string(), "hi".to_string())].into()),
        stdin: Some("from stdin".into()),
        ..exec_req("")
    };
    let out = h.exec(&sbx, &grant, req).await.unwrap();
    assert_eq!(out.stdout, "from stdin hi\n");
    assert_eq!(out.exit_code, Some(3));
    let secret_env = h
        .sh(&sbx, "echo ${SAGENTS_PROVIDER_TOKEN:-unset} $HOME")
        .await
        .unwrap();
    assert!(
        secret_env.stdout.starts_with("unset "),
        "{}",
        secret_env.stdout
    );
}
