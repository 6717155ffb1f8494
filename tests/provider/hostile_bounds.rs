//! A hostile tenant against the bounds of a sandbox as a whole: a process flood and a memory
//! hog stop at the sandbox's own cgroup limits while another tenant's command still runs at
//! once; a snapshot freezes every process of the sandbox, however it was started; each
//! sandbox has its own cgroup (gone once it is terminated), its own host uid and a sized
//! `/tmp`. Every attack is bounded, so a failing test cannot take the machine down.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// How long another tenant's `echo ok` may take while a sandbox misbehaves.
const PROMPT: Duration = Duration::from_secs(5);

fn status_field(pid: i32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_owned())
}

/// The host uid the sandbox's processes run as (its init's).
fn host_uid(h: &SandboxHandle) -> u32 {
    let uid = status_field(host_pid(h, 1), "Uid:").unwrap();
    uid.split_whitespace().next().unwrap().parse().unwrap()
}

/// The live host processes running `argv` (NUL-separated as in `/proc/PID/cmdline`) in the
/// sandbox's PID namespace.
fn processes_running(h: &SandboxHandle, cmdline: &str) -> usize {
    let ns = std::fs::read_link(format!("/proc/{}/ns/pid", host_pid(h, 1))).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok() == Some(ns.clone()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline.as_bytes())
        })
        .filter(|&pid| proc_state(pid).is_some())
        .count()
}

/// Waits (bounded) until none of `dirs` exists: a group is removed once its processes are gone.
async fn gone(dirs: &[PathBuf]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Some(d) = dirs.iter().find(|d| d.exists()) {
        assert!(
            Instant::now() < deadline,
            "{} outlived the sandbox",
            d.display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn read_trim(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn cgroup_dirs(h: &Harness, sbx: &SandboxHandle) -> Vec<PathBuf> {
    h.provider
        .as_ref()
        .unwrap()
        .engine()
        .cgroup_dirs(&sbx.r#ref.sandbox_id)
}

/// The folder of the hierarchy whose controller is `name` (`/sys/fs/cgroup/<name>/...` on v1,
/// the single folder on v2).
fn controller_dir(dirs: &[PathBuf], file: &str) -> PathBuf {
    dirs.iter()
        .find(|d| d.join(file).exists())
        .unwrap_or_else(|| panic!("no cgroup of the sandbox has {file}: {dirs:?}"))
        .clone()
}

/// Another tenant's trivial command answers promptly.
async fn answers_promptly(h: &Harness, sbx: &SandboxHandle) {
    let t = Instant::now();
    let out = h.sh(sbx, "echo ok").await.unwrap();
    assert_eq!(out.stdout, "ok\n", "{out:?}");
    assert!(
        t.elapsed() < PROMPT,
        "another tenant's exec took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn a_process_flood_stops_at_the_default_cap_and_spares_other_tenants() {
    let h = Harness::start().await;
    let cap = h.config.defaults.max_processes as usize;
    let other = h.provision("other").await;
    let flood = h.provision("flood").await;
    // A fixed number, well above the cap: bounded even where nothing caps it.
    let out = h
        .sh(
            &flood,
            "i=0; while [ $i -lt 2000 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; echo all",
        )
        .await
        .unwrap();
    let started = processes_running(&flood, "sleep\x0030\x00");
    assert!(started > 0, "{out:?}");
    assert!(
        started <= cap,
        "{started} processes started in a sandbox capped at {cap}"
    );
    answers_promptly(&h, &other).await;
    let receipt = h
        .release(&flood, ReleaseDisposition::Terminate, "r1")
        .await
        .unwrap();
    assert_eq!(receipt.state, SandboxState::Terminated);
    answers_promptly(&h, &other).await;
}

#[tokio::test]
async fn a_memory_hog_is_stopped_at_the_sandbox_limit_and_spares_other_tenants() {
    let h = Harness::with(|c| c.defaults.memory_mb = 64).await;
    let other = h.provision("other").await;
    let hog = h.provision("hog").await;
    // `tail` keeps a newline-less input whole: 300 MB, five times the sandbox's default.
    let hogging = h.sh(&hog, "head -c 300000000 /dev/zero | tail | wc -c");
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        answers_promptly(&h, &other).await;
    };
    let (out, ()) = tokio::join!(hogging, meanwhile);
    let out = out.unwrap();
    assert_ne!(
        out.stdout.trim(),
        "300000000",
        "the hog held 300 MB in a sandbox limited to 64 MiB"
    );
    let memory = controller_dir(&cgroup_dirs(&h, &hog), "memory.max_usage_in_bytes");
    let peak: u64 = read_trim(&memory.join("memory.max_usage_in_bytes"))
        .parse()
        .unwrap();
    assert!(peak <= 64 << 20, "the sandbox peaked at {peak} bytes");
    // The sandbox itself survives its hog and still runs commands.
    answers_promptly(&h, &hog).await;
    answers_promptly(&h, &other).await;
}

/// Writes a round number into twenty files in turn, forever; and notes in `escaped` when it
/// runs while the process named in `spid` is stopped (a sandbox half-paused by signals).
const WRITER: &str = r#"L=$(seq -w 1 20); n=0; while :; do n=$((n+1)); for f in $L; do echo $n > c$f; done; read -r s < spid; read -r st < /proc/$s/stat; case "$st" in *") T "*) echo $n > escaped;; esac; done"#;

/// The round numbers of the counter files in the order they are written; an empty file (caught
/// between truncation and write) is skipped.
fn counters(listing: &str) -> Vec<u64> {
    listing
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[tokio::test]
async fn a_snapshot_freezes_every_process_of_the_sandbox_and_none_outlives_it() {
    // Two cores, so the guards are not throttled while the writer runs.
    let h = Harness::with(|c| c.defaults.cpu_percent = 200).await;
    let sbx = h.provision("p1").await;
    let uid = host_uid(&sbx);
    // A writer in its own session; 400 idle processes started after it; then guards that
    // keep sending the writer SIGCONT: two busy loops, and one that hops to a new pid (a
    // double fork in a new session) every round, so stopping the processes one by one cannot
    // hold the writer. Counter files lie between large incompressible ones, so archiving
    // them takes a while.
    let script = format!(
        "for f in $(seq -w 1 20); do echo 0 > c$f; head -c 1000000 /dev/urandom > big$f; done; \
         echo 1 > spid; setsid sh -c '{WRITER}' </dev/null >/dev/null 2>&1 & W=$!; \
         sleep 60 </dev/null >/dev/null 2>&1 & echo $! > spid; \
         i=0; while [ $i -lt 400 ]; do sleep 60 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; \
         for g in 1 2; do setsid sh -c \"while :; do kill -CONT $W; done\" </dev/null >/dev/null 2>&1 & done; \
         echo 'kill -CONT $1; (setsid sh guard.sh $1 </dev/null >/dev/null 2>&1 &)' > guard.sh; \
         (setsid sh guard.sh $W </dev/null >/dev/null 2>&1 &); \
         echo started"
    );
    assert_eq!(h.sh(&sbx, &script).await.unwrap().stdout, "started\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while h
        .sh(&sbx, "cat c20")
        .await
        .unwrap()
        .stdout
        .trim()
        .parse::<u64>()
        .unwrap_or(0)
        < 5
    {
        assert!(Instant::now() < deadline, "the writer never ran");
    }
    let receipt = h
        .release(&sbx, ReleaseDisposition::SnapshotAndTerminate, "r1")
        .await
        .unwrap();
    let checkpoint = receipt.checkpoint.expect("a checkpoint");
    gone(&cgroup_dirs(&h, &sbx)).await;
    let survivors: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            proc_state(pid).is_some()
                && status_field(pid, "Uid:")
                    .is_some_and(|u| u.split_whitespace().next() == Some(&uid.to_string()))
        })
        .collect();
    assert!(survivors.is_empty(), "{survivors:?} outlived the release");
    // The files were archived as of one instant: the writer is caught mid-round, never
    // mid-archive, so a file it writes later in a round holds the same round or the one
    // before.
    let restored = h.restore(&checkpoint, "restore-1").await.unwrap();
    let listing = h
        .sh(&restored, "for f in c??; do cat $f; echo; done")
        .await
        .unwrap()
        .stdout;
    let escaped = h
        .sh(&restored, "cat escaped 2>/dev/null")
        .await
        .unwrap()
        .stdout;
    assert_eq!(
        escaped, "",
        "the writer ran on while the sandbox was being stopped"
    );
    let values = counters(&listing);
    assert!(values.len() >= 19, "{listing}");
    for w in values.windows(2) {
        assert!(
            w[0] == w[1] || w[0] == w[1] + 1,
            "the writer's files are torn in the checkpoint: {values:?}"
        );
    }
}

#[tokio::test]
async fn each_sandbox_has_its_own_bounded_cgroup_until_it_is_terminated() {
    let h = Harness::start().await;
    let caps = h
        .client
        .capabilities(&CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        caps.bounded_resources,
        ["max_processes", "memory_mb", "cpu_percent"],
        "the capabilities name what this host bounds"
    );
    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources = Resources {
        max_processes: Some(40),
        memory_mb: Some(96),
        cpu_percent: Some(50),
        ..Resources::default()
    };
    let bounded = h.provision_spec("p1", s).await.unwrap();
    let plain = h.provision("p2").await;
    let dirs = cgroup_dirs(&h, &bounded);
    let pids = controller_dir(&dirs, "pids.max");
    assert_eq!(
        read_trim(&pids.join("pids.max")),
        "43",
        "40 plus the leader's 3"
    );
    let members = read_trim(&pids.join("cgroup.procs"));
    assert!(
        members
            .lines()
            .any(|p| p == host_pid(&bounded, 1).to_string()),
        "the sandbox's init is not in its cgroup: {members}"
    );
    let memory = controller_dir(&dirs, "memory.limit_in_bytes");
    assert_eq!(
        read_trim(&memory.join("memory.limit_in_bytes")),
        (96u64 << 20).to_string()
    );
    let cpu = controller_dir(&dirs, "cpu.cfs_quota_us");
    assert_eq!(read_trim(&cpu.join("cpu.cfs_quota_us")), "50000");
    assert_eq!(read_trim(&cpu.join("cpu.cfs_period_us")), "100000");
    // A command, and what it leaves in the background, run in the sandbox's cgroup.
    let out = h
        .sh(
            &bounded,
            "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $!",
        )
        .await
        .unwrap();
    let nspid: i32 = out.stdout.trim().parse().unwrap();
    let sleeper = host_pid(&bounded, nspid);
    assert!(read_trim(&pids.join("cgroup.procs"))
        .lines()
        .any(|p| p == sleeper.to_string()));
    // The default spec gets the operator's defaults.
    let plain_pids = controller_dir(&cgroup_dirs(&h, &plain), "pids.max");
    assert_eq!(
        read_trim(&plain_pids.join("pids.max")),
        (h.config.defaults.max_processes + 3).to_string()
    );
    h.release(&bounded, ReleaseDisposition::Terminate, "r1")
        .await
        .unwrap();
    gone(&dirs).await;
    assert!(proc_state(sleeper).is_none());
}

#[tokio::test]
async fn two_sandboxes_run_as_two_host_uids_with_a_sized_tmp() {
    let h = Harness::start().await;
    let a = h.provision("a").await;
    let b = h.provision("b").await;
    let (ua, ub) = (host_uid(&a), host_uid(&b));
    let range = h.config.sandbox_uids;
    assert_ne!(ua, ub, "two sandboxes share host uid {ua}");
    for uid in [ua, ub] {
        assert!((range.first..=range.last).contains(&uid), "{uid}");
    }
    // /tmp is a tmpfs of the configured size: filling it fails instead of eating host RAM.
    let out = h
        .sh(
            &a,
            "head -c 100000000 /dev/zero > /tmp/big; echo $?; df -k /tmp | tail -1",
        )
        .await
        .unwrap();
    let mut lines = out.stdout.lines();
    assert_ne!(lines.next(), Some("0"), "{out:?}");
    let size_kb: u64 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(size_kb, h.config.defaults.tmp_mb * 1024, "{out:?}");
}

#[tokio::test]
async fn a_spec_asking_for_impossible_bounds_is_refused() {
    let h = Harness::start().await;
    let mut s = spec(WorkspaceMode::Isolated, None);
    s.resources.memory_mb = Some(1);
    assert_eq!(
        refused(h.provision_spec("p1", s).await),
        (422, "validation.failed".into())
    );
}

#[tokio::test]
async fn uids_stay_taken_across_a_restart_and_are_freed_by_a_terminate() {
    let range: sagents_local_provider::UidRange = "300000-300001".parse().unwrap();
    let mut h = Harness::with(|c| c.sandbox_uids = range).await;
    let a = h.provision("a").await;
    h.restart().await;
    let b = h.provision("b").await;
    let (ua, ub) = (host_uid(&a), host_uid(&b));
    assert_ne!(ua, ub, "a restart handed out a uid a live sandbox holds");
    // No uid left: a retryable refusal, not a sandbox sharing one.
    match h
        .provision_spec("c", spec(WorkspaceMode::Isolated, None))
        .await
    {
        Err(ProviderCallError::Recoverable { status, error }) => {
            assert_eq!((status, error.code.as_str()), (503, "sandbox.capacity"))
        }
        other => panic!("expected a retryable refusal, got {other:?}"),
    }
    h.release(&a, ReleaseDisposition::Terminate, "r1")
        .await
        .unwrap();
    let c = h.provision("c").await;
    assert_eq!(
        host_uid(&c),
        ua,
        "a terminated sandbox's uid is handed out again"
    );
}

#[tokio::test]
async fn a_start_removes_the_cgroups_of_sandboxes_that_are_gone() {
    let mut h = Harness::start().await;
    let live = h.provision("p1").await;
    let dirs = cgroup_dirs(&h, &live);
    // What a crashed provider would leave: a group no sandbox of this root owns, with a
    // process in it.
    let stale: Vec<PathBuf> = dirs
        .iter()
        .map(|d| d.with_file_name("sbx_crashed"))
        .collect();
    for d in &stale {
        std::fs::create_dir(d).unwrap();
    }
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(stale[0].join("cgroup.procs"), child.id().to_string()).unwrap();
    h.restart().await;
    for d in &stale {
        assert!(!d.exists(), "{} survived the start", d.display());
    }
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the stale group's process was not killed"
    );
    for d in &dirs {
        assert!(d.exists(), "a live sandbox lost its cgroup {}", d.display());
    }
    answers_promptly(&h, &live).await;
}
