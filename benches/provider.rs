//! Snapshot and restore through the local provider's HTTP API against the command-line floor
//! (`tar -cf - . | zstd -3` and `zstd -d | tar -xf -`, zstd's default single compression
//! thread, same level) for workspaces of 1, 10 and 100 MiB: each checkpoint is restored
//! twice, first from the warm cache (the released sandbox's files, kept), then from its
//! archive. Also the latency of a provision and of an exec (`true`), plus the provider's
//! memory per idle sandbox.
//!
//! `cargo bench --bench provider` (set `PROVIDER_BENCH_RUNS` to change the 7 runs;
//! `PROVIDER_BENCH_BIN=PATH` measures another build of the provider's binary instead of the one
//! built beside the bench, so two builds can be compared in turn).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests and benchmarks stop at the first surprise and print what they measure"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sagents::providers::client::{CallOptions, ProviderClient};
use sagents::providers::wire::{
    ExecRequest, ProvisionRequest, ReleaseRequest, ReleaseSpec, RequestContext, RestoreRequest,
    SandboxHandle,
};
use sagents::providers::wire_spec::{
    LifecyclePolicy, ReleaseDisposition, ResolvedSandboxSpec, Resources, WorkspaceMode,
    SPEC_VERSION_V3,
};

const FILES: usize = 1000;
const TOKEN: &str = "provider-bench-token-0123456789abcdef";
/// Execs timed per run, in one sandbox.
const EXECS: usize = 30;
const MIB: usize = 1024 * 1024;
/// Workspace sizes measured, in MiB; provisions and execs are timed with the first.
const SIZES_MIB: [usize; 3] = [10, 1, 100];

#[path = "provider/burst.rs"]
mod burst;
use burst::{burst, BURST, BURST_MIB};
#[path = "provider/incremental.rs"]
mod incremental;

fn make_tree(dir: &Path, total_bytes: usize) {
    text_tree(dir, FILES, total_bytes / FILES, 42);
}

/// `files` files of `per_file` bytes of source-like text, in 20 folders.
fn text_tree(dir: &Path, files: usize, per_file: usize, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = [
        "sandbox", "release", "restore", "agent", "tool", "call", "fn", "let", "mut", "match",
        "return", "0x1f", "{", "}", "=>", "self", "async", "await", "struct", "impl",
    ];
    for i in 0..files {
        let sub = dir.join(format!("d{:02}", i % 20));
        std::fs::create_dir_all(&sub).unwrap();
        let mut buf = Vec::with_capacity(per_file + 16);
        while buf.len() < per_file {
            if rng.gen_ratio(1, 4) {
                let n: u64 = rng.gen();
                buf.extend_from_slice(format!("{n:x} ").as_bytes());
            } else {
                buf.extend_from_slice(words[rng.gen_range(0..words.len())].as_bytes());
                buf.push(if rng.gen_ratio(1, 8) { b'\n' } else { b' ' });
            }
        }
        buf.truncate(per_file);
        std::fs::write(sub.join(format!("f{i:04}.txt")), buf).unwrap();
    }
}

fn sh(script: &str, cwd: &Path) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The reference provider's binary, built beside this bench (`cargo build --release --bins`).
fn provider_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("PROVIDER_BENCH_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = profile_dir.join("sagents-local-provider");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release --bins` first",
        bin.display()
    );
    bin
}

struct Provider {
    child: Child,
    base_url: String,
}

impl Provider {
    fn start(root: &Path) -> Self {
        Self::start_with(root, &[])
    }

    fn start_with(root: &Path, flags: &[&str]) -> Self {
        let mut child = Command::new(provider_binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(flags)
            .env("SAGENTS_PROVIDER_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        Provider {
            child,
            base_url: format!("http://{addr}"),
        }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spec() -> ResolvedSandboxSpec {
    ResolvedSandboxSpec {
        spec_version: SPEC_VERSION_V3.into(),
        provider_id: "local".into(),
        spec_hash: format!("sha256:{}", "a".repeat(64)),
        policy_hash: format!("sha256:{}", "b".repeat(64)),
        workspace_mode: WorkspaceMode::Isolated,
        host_workspace: None,
        lifecycle: LifecyclePolicy::default(),
        resources: Resources::default(),
        metadata: serde_json::json!({}),
    }
}

async fn provision(c: &ProviderClient, key: &str) -> SandboxHandle {
    let req = ProvisionRequest {
        spec: spec(),
        owner_run_id: "run_bench".into(),
        tenant_id: "bench".into(),
        idempotency_key: key.into(),
        context: RequestContext::default(),
    };
    c.provision(&req, &CallOptions::default()).await.unwrap()
}

fn release(h: &SandboxHandle, d: ReleaseDisposition, key: &str) -> ReleaseRequest {
    ReleaseRequest {
        request: ReleaseSpec {
            r#ref: h.r#ref.clone(),
            disposition: d,
            reason: "bench".into(),
            expected_revision: None,
            idempotency_key: key.into(),
        },
        context: RequestContext::default(),
    }
}

/// One workspace size's medians.
#[derive(Default)]
struct Row {
    mib: usize,
    floor_pack: Vec<f64>,
    floor_unpack: Vec<f64>,
    snap: Vec<f64>,
    warm: Vec<f64>,
    archive: Vec<f64>,
    ckp_size: u64,
    floor_size: u64,
}

/// Measures snapshot, warm restore and archive restore of a `mib` workspace `runs` times;
/// provisions and execs are timed into the given vectors when asked.
async fn measure(
    work: &Path,
    root: &Path,
    client: &ProviderClient,
    mib: usize,
    runs: usize,
    mut timed: Option<(&mut Vec<f64>, &mut Vec<f64>)>,
) -> Row {
    let tree = work.join(format!("tree-{mib}"));
    make_tree(&tree, mib * MIB);
    let archive = work.join(format!("floor-{mib}.tar.zst"));
    let mut row = Row {
        mib,
        ..Row::default()
    };
    // Each run measures the floor and the provider back to back, so both see the same load;
    // pending writes are flushed (untimed) before each measurement.
    for i in 0..runs {
        settle(root);
        let t = Instant::now();
        sh(
            &format!("tar -cf - . | zstd -3 -q > {}", archive.display()),
            &tree,
        );
        row.floor_pack.push(ms(t.elapsed()));

        let t = Instant::now();
        let h = provision(client, &format!("bench-{mib}-{i}")).await;
        let provisioned = ms(t.elapsed());
        if let Some((provisions, execs)) = timed.as_mut() {
            provisions.push(provisioned);
            let grant = h.grant.clone().expect("a ready sandbox's grant").token;
            let exec = ExecRequest {
                argv: vec!["true".into()],
                cwd: None,
                env: None,
                stdin: None,
                timeout_seconds: 10,
            };
            for _ in 0..EXECS {
                let t = Instant::now();
                let out = client
                    .exec(&h.r#ref.sandbox_id, &grant, &exec, &CallOptions::default())
                    .await
                    .unwrap();
                execs.push(ms(t.elapsed()));
                assert_eq!(out.exit_code, Some(0));
            }
        }
        let dir = root.join("sandboxes").join(&h.r#ref.sandbox_id);
        sh(
            &format!("cp -a {}/. {}", tree.display(), dir.display()),
            &tree,
        );
        let snap_req = release(
            &h,
            ReleaseDisposition::SnapshotAndTerminate,
            &format!("snap-{mib}-{i}"),
        );
        settle(root);
        let t = Instant::now();
        let receipt = client
            .release(&snap_req, &CallOptions::default())
            .await
            .unwrap();
        row.snap.push(ms(t.elapsed()));

        let out = work.join(format!("floor-out-{mib}-{i}"));
        std::fs::create_dir(&out).unwrap();
        settle(root);
        let t = Instant::now();
        sh(
            &format!("zstd -d -q -c {} | tar -xf -", archive.display()),
            &out,
        );
        row.floor_unpack.push(ms(t.elapsed()));
        std::fs::remove_dir_all(&out).unwrap();

        let checkpoint = receipt.checkpoint.unwrap();
        row.ckp_size = checkpoint.size_bytes;
        let kept = root.join("warm").join(&checkpoint.checkpoint_id);
        assert!(kept.exists(), "the released sandbox's files are kept warm");
        for (from_cache, times) in [(true, &mut row.warm), (false, &mut row.archive)] {
            let req = RestoreRequest {
                checkpoint: checkpoint.clone(),
                spec: spec(),
                owner_run_id: "run_bench".into(),
                idempotency_key: format!("restore-{mib}-{i}-{from_cache}"),
                context: RequestContext::default(),
            };
            settle(root);
            let t = Instant::now();
            let restored = client.restore(&req, &CallOptions::default()).await.unwrap();
            times.push(ms(t.elapsed()));
            assert!(!kept.exists(), "the first restore used the kept files");
            let rdir = root.join("sandboxes").join(&restored.r#ref.sandbox_id);
            assert_eq!(walk_count(&rdir), FILES, "restore brought every file back");
            let key = format!("t-{mib}-{i}-{from_cache}");
            let end = release(&restored, ReleaseDisposition::Terminate, &key);
            client.release(&end, &CallOptions::default()).await.unwrap();
        }
    }
    row.floor_size = std::fs::metadata(&archive).unwrap().len();
    std::fs::remove_dir_all(&tree).unwrap();
    row
}

fn main() {
    let runs: usize = std::env::var("PROVIDER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    if std::env::var_os("PROVIDER_BENCH_CHECKPOINTS_ONLY").is_some() {
        incremental::run(runs);
        return;
    }
    let work = tempfile::tempdir().unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let root = work.path().join("provider");
    let provider = Provider::start(&root);
    let client = ProviderClient::new(&provider.base_url, Some(TOKEN)).unwrap();
    let (mut provisions, mut execs) = (Vec::new(), Vec::new());
    let rows: Vec<Row> = rt.block_on(async {
        let mut rows = Vec::new();
        for (n, mib) in SIZES_MIB.into_iter().enumerate() {
            let timed = (n == 0).then_some((&mut provisions, &mut execs));
            rows.push(measure(work.path(), &root, &client, mib, runs, timed).await);
        }
        rows
    });
    drop(provider);

    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let unbounded = BURST.to_string();
    let configs: [(&str, Vec<&str>); 3] = [
        ("archive, one unpack per core", vec!["--warm-cache-mb", "0"]),
        (
            "archive, all unpacks at once",
            vec!["--warm-cache-mb", "0", "--restore-concurrency", &unbounded],
        ),
        ("warm cache", vec![]),
    ];
    let bursts: Vec<(&str, Vec<f64>)> = rt.block_on(async {
        let mut out = Vec::new();
        for (name, flags) in &configs {
            let slug = name.replace([',', ' '], "-");
            out.push((*name, burst(work.path(), &slug, flags).await));
        }
        out
    });

    // Memory: one fresh provider, RSS with 0 and with 100 idle sandboxes.
    let idle_root = work.path().join("idle");
    let provider = Provider::start(&idle_root);
    let client = ProviderClient::new(&provider.base_url, Some(TOKEN)).unwrap();
    let (rss0, rss100) = rt.block_on(async {
        let warm = provision(&client, "warm").await;
        client
            .release(
                &release(&warm, ReleaseDisposition::Terminate, "warm-t"),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        let rss0 = provider.rss_kib();
        for i in 0..100 {
            provision(&client, &format!("idle-{i}")).await;
        }
        (rss0, provider.rss_kib())
    });
    drop(provider);
    kill_leaders(&idle_root);
    kill_leaders(&root);

    let (pv, ex) = (median(provisions), median(execs));
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "provider bench: {FILES} files per workspace, {runs} runs, medians"
    )
    .unwrap();
    for row in rows {
        let (fp, fu, sp) = (
            median(row.floor_pack),
            median(row.floor_unpack),
            median(row.snap),
        );
        let (wr, ar) = (median(row.warm), median(row.archive));
        writeln!(
            out,
            "{} MiB: archive size: provider {} B, floor {} B",
            row.mib, row.ckp_size, row.floor_size
        )
        .unwrap();
        writeln!(out, "  snapshot_and_terminate (HTTP): {sp:8.1} ms   floor tar|zstd -3: {fp:8.1} ms   ratio {:.2}x", sp / fp).unwrap();
        writeln!(out, "  restore from archive (HTTP):  {ar:8.1} ms   floor zstd -d|tar -x: {fu:5.1} ms   ratio {:.2}x", ar / fu).unwrap();
        writeln!(
            out,
            "  restore from warm cache (HTTP): {wr:6.1} ms   vs floor {:.2}x, vs archive {:.2}x",
            wr / fu,
            wr / ar
        )
        .unwrap();
    }
    for (name, done) in bursts {
        writeln!(
            out,
            "burst of {BURST} restores at once, {BURST_MIB} MiB each, {cores} cores, {name}: p50 {:6.1} ms   max {:6.1} ms",
            done[done.len() / 2],
            done[done.len() - 1]
        )
        .unwrap();
    }
    writeln!(
        out,
        "provision (HTTP): {pv:8.1} ms   exec `true` (HTTP, {} execs): {ex:6.2} ms",
        runs * EXECS
    )
    .unwrap();
    writeln!(out, "provider RSS: {rss0} KiB with 0 sandboxes, {rss100} KiB with 100 idle; {:.1} KiB per idle sandbox", (rss100 as f64 - rss0 as f64) / 100.0).unwrap();
}

fn settle_disk() {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
}

/// Waits for the provider's background deletions, then flushes dirty pages to disk.
fn settle(root: &Path) {
    let trash = root.join("trash");
    for _ in 0..5000 {
        let busy = std::fs::read_dir(&trash).is_ok_and(|mut d| d.next().is_some());
        if !busy {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    settle_disk();
}

fn walk_count(dir: &Path) -> usize {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .count()
}

/// The provider process is gone; its sandboxes' leaders are still running: kill them.
fn kill_leaders(root: &Path) {
    let states: PathBuf = root.join("state/sandboxes");
    for entry in std::fs::read_dir(states).into_iter().flatten().flatten() {
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if let Some(pid) = v["leader"]["pid"].as_i64() {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    }
}
