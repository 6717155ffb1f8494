//! A tenant plays attacker against the provider's file handling: symlinks swapped in while a
//! snapshot is archived, crafted checkpoints, an active workspace's parent swapped for a
//! symlink, overlapping workspaces and a folder owned by another user. Nothing outside the
//! sandbox is read, written, chowned, chmodded or mounted, and the sandbox never runs as a
//! folder's owner.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sagents::providers::wire_spec::ReleaseDisposition as D;

use super::*;

/// Atomically swaps two names (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> bool {
    let a = CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = CString::new(b.as_os_str().as_bytes()).unwrap();
    // SAFETY: two valid NUL-terminated paths.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

/// Swaps each pair of names back and forth on a host thread until stopped (at most
/// `MAX_SWEEPS` sweeps): it stands in for a sandbox process that the snapshot did not stop.
/// Every pair that still exists ends as it began.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

const MAX_SWEEPS: u64 = 200_000;

impl Swapper {
    fn start(pairs: Vec<(PathBuf, PathBuf)>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swapped = vec![0u64; pairs.len()];
            for _ in 0..MAX_SWEEPS {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                for ((a, b), n) in pairs.iter().zip(&mut swapped) {
                    *n += u64::from(exchange(a, b));
                }
            }
            for ((a, b), n) in pairs.iter().zip(&swapped) {
                // Best effort: a terminated sandbox's folder is gone.
                if n % 2 == 1 {
                    exchange(a, b);
                }
            }
            swapped.iter().sum()
        });
        Swapper { stop, thread }
    }

    /// Stops the swapping; the number of swaps made.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Every regular file below `dir`, never following a symlink.
fn regular_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = p.symlink_metadata().unwrap();
        if meta.is_dir() {
            out.extend(regular_files(&p));
        } else if meta.is_file() {
            out.push(p);
        }
    }
    out
}

fn sandbox_dir(h: &Harness, sbx: &SandboxHandle) -> PathBuf {
    h.root.path().join("sandboxes").join(&sbx.r#ref.sandbox_id)
}

const PAIRS: usize = 20;
const FILLERS: usize = 1500;

#[tokio::test]
async fn symlinks_swapped_in_during_a_snapshot_bring_no_host_file_into_the_checkpoint() {
    let h = Harness::start().await;
    let root = h.root.path().canonicalize().unwrap();
    let secret = root.join("state/host-secret");
    std::fs::write(&secret, "HOST-SECRET-MARKER\n").unwrap();
    let shadow = std::fs::read("/etc/shadow").unwrap();
    for round in 0..3 {
        let sbx = h.provision(&format!("p{round}")).await;
        // Files and a folder, each beside a symlink to a host path of the same kind; many
        // plain files make the walk long enough for the swaps to land inside it.
        let script = format!(
            "mkdir p && cd p && for i in $(seq 1 {PAIRS}); do echo tenant > f$i; ln -s {s} l$i; \
             done; for i in $(seq 1 {FILLERS}); do echo tenant > z$i; done; cd .. && \
             mkdir d && echo tenant > d/x && ln -s {state} dl; \
             echo tenant > sh && ln -s /etc/shadow shl; echo made",
            s = secret.display(),
            state = root.join("state").display(),
        );
        assert_eq!(h.sh(&sbx, &script).await.unwrap().stdout, "made\n");
        let dir = sandbox_dir(&h, &sbx);
        let mut pairs: Vec<_> = (1..=PAIRS)
            .map(|i| (dir.join(format!("p/f{i}")), dir.join(format!("p/l{i}"))))
            .collect();
        pairs.push((dir.join("d"), dir.join("dl")));
        pairs.push((dir.join("sh"), dir.join("shl")));
        let swapper = Swapper::start(pairs);
        // The attacker retries a snapshot that failed, until one is taken.
        let mut released = Err(None);
        for attempt in 0..5 {
            let key = format!("s{round}-{attempt}");
            released = match h.release(&sbx, D::SnapshotAndTerminate, &key).await {
                Ok(r) => Ok(r),
                Err(ProviderCallError::Recoverable { error, .. })
                    if error.code == "sandbox.snapshot_failed" =>
                {
                    Err(Some(error))
                }
                Err(other) => panic!("round {round}: {other:?}"),
            };
            if released.is_ok() {
                break;
            }
        }
        let swaps = swapper.finish();
        assert!(swaps > 0, "the swapper never ran");
        let checkpoint = released.unwrap().checkpoint.unwrap();
        let restored = h.restore(&checkpoint, &format!("r{round}")).await.unwrap();
        let back = sandbox_dir(&h, &restored);
        // Every name came back, as the file or as the link it was when it was looked at.
        for i in 1..=PAIRS {
            for name in [format!("p/f{i}"), format!("p/l{i}")] {
                assert!(
                    back.join(&name).symlink_metadata().is_ok(),
                    "round {round}: {name}"
                );
            }
        }
        for f in regular_files(&back) {
            let body = std::fs::read(&f).unwrap();
            assert_ne!(
                body, shadow,
                "round {round}: /etc/shadow came back as {f:?}"
            );
            assert_eq!(
                String::from_utf8_lossy(&body),
                "tenant\n",
                "round {round}: {f:?} holds a host file"
            );
        }
        h.release(&restored, D::Terminate, &format!("t{round}"))
            .await
            .unwrap();
    }
}

/// An archive entry: name, kind, and body (or link target).
type Entry<'a> = (&'a str, tar::EntryType, &'a str);

/// A tar stream with entries as given; names and link targets are written raw, unchecked.
fn crafted(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, body) in entries {
        let mut hd = tar::Header::new_gnu();
        hd.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        hd.set_entry_type(*kind);
        hd.set_mode(0o644);
        let data = match kind.is_symlink() || kind.is_hard_link() {
            true => {
                hd.as_gnu_mut().unwrap().linkname[..body.len()].copy_from_slice(body.as_bytes());
                &b""[..]
            }
            false => body.as_bytes(),
        };
        if kind.is_character_special() {
            hd.set_device_major(1).unwrap();
            hd.set_device_minor(3).unwrap();
        }
        hd.set_size(data.len() as u64);
        hd.set_cksum();
        b.append(&hd, data).unwrap();
    }
    zstd::encode_all(&b.into_inner().unwrap()[..], 3).unwrap()
}

/// Puts `archive` in the provider's store as checkpoint `c`, an archive of the previous
/// format, with its digest recorded.
fn plant(h: &Harness, c: &CheckpointRef, archive: &[u8]) -> CheckpointRef {
    use sha2::Digest;
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(archive)));
    let root = h.root.path();
    std::fs::write(
        root.join(format!("checkpoints/{}.tar.zst", c.checkpoint_id)),
        archive,
    )
    .unwrap();
    let state = root.join(format!("state/checkpoints/{}.json", c.checkpoint_id));
    let mut stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    stored["digest"] = serde_json::json!(digest);
    // Recorded as the previous build recorded archives.
    stored.as_object_mut().unwrap().remove("format");
    stored["size_bytes"] = serde_json::json!(archive.len());
    std::fs::write(&state, serde_json::to_vec(&stored).unwrap()).unwrap();
    CheckpointRef {
        digest: Some(digest),
        size_bytes: archive.len() as u64,
        ..c.clone()
    }
}

#[tokio::test]
async fn crafted_checkpoints_are_refused_and_write_nothing_outside() {
    use tar::EntryType as E;
    let h = Harness::start().await;
    let root = h.root.path().canonicalize().unwrap();
    let outside = root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let sbx = h.provision("p1").await;
    h.sh(&sbx, "echo mine > kept.txt").await.unwrap();
    let real = h
        .release(&sbx, D::SnapshotAndTerminate, "s1")
        .await
        .unwrap()
        .checkpoint
        .unwrap();
    let original = crafted(&[("kept.txt", E::Regular, "mine\n")]);
    let abs = outside.join("abs").display().to_string();
    let out = outside.display().to_string();
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        ("absolute", vec![(&abs, E::Regular, "x")]),
        ("dotdot", vec![("../../outside/dd", E::Regular, "x")]),
        (
            "hidden dotdot",
            vec![("a/../../../outside/h", E::Regular, "x")],
        ),
        (
            "write through a symlink",
            vec![
                ("link", E::Symlink, &out),
                ("link/through", E::Regular, "x"),
            ],
        ),
        (
            "folder through a symlink",
            vec![("link", E::Symlink, &out), ("link/sub", E::Directory, "")],
        ),
        ("hard link out", vec![("hl", E::Link, "/etc/passwd")]),
        (
            "hard link in",
            vec![("f", E::Regular, "x"), ("hl", E::Link, "f")],
        ),
        ("device", vec![("null", E::Char, "")]),
        ("fifo", vec![("pipe", E::Fifo, "")]),
    ];
    for (i, (what, entries)) in cases.iter().enumerate() {
        let c = plant(&h, &real, &crafted(entries));
        assert_eq!(
            refused(h.restore(&c, &format!("bad{i}")).await),
            (422, "checkpoint.unsafe".into()),
            "{what}"
        );
        let left: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
        assert!(left.is_empty(), "{what} wrote outside: {left:?}");
    }
    assert!(!root.join("outside-dd").exists() && !Path::new("/etc/passwd/through").exists());
    // Bytes that are no archive at all: final, not retried.
    let c = plant(&h, &real, b"not an archive");
    match h.restore(&c, "garbage").await {
        Err(ProviderCallError::Terminal { error, .. }) => {
            assert_eq!(error.code, "checkpoint.corrupt", "{error:?}")
        }
        other => panic!("expected a terminal failure, got {other:?}"),
    }
    // A sound archive of the previous format restores.
    let c = plant(&h, &real, &original);
    let back = h.restore(&c, "good").await.unwrap();
    assert_eq!(h.sh(&back, "cat kept.txt").await.unwrap().stdout, "mine\n");
}

fn active(host: &str) -> sagents::providers::wire_spec::ResolvedSandboxSpec {
    spec(WorkspaceMode::ActiveWorkspace, Some(host))
}

#[tokio::test]
async fn a_workspace_parent_swapped_for_a_symlink_is_refused_or_stays_inside() {
    let h = Harness::start().await;
    let root = h.root.path().canonicalize().unwrap();
    let tenant = root.join("workspaces/acme");
    std::fs::create_dir_all(tenant.join("team/proj")).unwrap();
    // Another tenant's workspace, root-owned and 0755: the target of the swapped-in link.
    let theirs = root.join("workspaces/other");
    std::fs::create_dir_all(theirs.join("proj")).unwrap();
    std::fs::set_permissions(theirs.join("proj"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&theirs, tenant.join("team-link")).unwrap();
    let swapper = Swapper::start(vec![(tenant.join("team"), tenant.join("team-link"))]);
    let mut inside = Vec::new();
    for i in 0..16 {
        match h
            .provision_spec(&format!("w{i}"), active("team/proj"))
            .await
        {
            Ok(sbx) => {
                let out = h.sh(&sbx, &format!("echo {i} > mark{i}")).await.unwrap();
                assert_eq!(out.exit_code, Some(0), "{out:?}");
                inside.push(i);
                h.release(&sbx, D::Terminate, &format!("t{i}"))
                    .await
                    .unwrap();
            }
            // Walked while the link was in place: refused.
            Err(ProviderCallError::Refused { status, error }) => assert_eq!(
                (status, error.code.as_str()),
                (422, "sandbox.workspace_outside_root")
            ),
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(swapper.finish() > 0);
    assert!(tenant.join("team").symlink_metadata().unwrap().is_dir());
    let target = std::fs::metadata(theirs.join("proj")).unwrap();
    assert!(!inside.is_empty(), "no provision succeeded");
    assert_eq!(
        (target.uid(), target.gid()),
        (0, 0),
        "the outside folder was chowned"
    );
    assert_eq!(
        target.mode() & 0o7777,
        0o755,
        "the outside folder was chmodded"
    );
    let there: Vec<_> = std::fs::read_dir(theirs.join("proj")).unwrap().collect();
    assert!(there.is_empty(), "a sandbox wrote outside: {there:?}");
    for i in inside {
        assert!(tenant.join(format!("team/proj/mark{i}")).exists(), "{i}");
    }
}

#[tokio::test]
async fn overlapping_active_workspaces_are_refused() {
    let h = Harness::start().await;
    let outer = h.provision_spec("o", active("outer")).await.unwrap();
    for host in ["outer", "outer/inner", "./outer/deep/er"] {
        assert_eq!(
            refused(h.provision_spec(host, active(host)).await),
            (409, "sandbox.workspace_in_use".into()),
            "{host}"
        );
    }
    let inner = h.provision_spec("i", active("nest/inner")).await.unwrap();
    assert_eq!(
        refused(h.provision_spec("n", active("nest")).await),
        (409, "sandbox.workspace_in_use".into())
    );
    // A sibling does not overlap, and a released workspace frees its parent.
    h.provision_spec("s", active("nest/sibling")).await.unwrap();
    h.release(&outer, D::Terminate, "t1").await.unwrap();
    h.provision_spec("o2", active("outer/inner")).await.unwrap();
    h.release(&inner, D::Terminate, "t2").await.unwrap();
}

#[tokio::test]
async fn a_folder_owned_by_another_user_is_not_adopted() {
    let h = Harness::start().await;
    let mine = h.root.path().join("workspaces/acme/mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::os::unix::fs::chown(&mine, Some(4321), Some(4321)).unwrap();
    let sbx = h.provision_spec("m", active("mine")).await.unwrap();
    let out = h.sh(&sbx, "echo ok > f && cat f").await.unwrap();
    assert_eq!(out.stdout, "ok\n", "{out:?}");
    let state = h
        .root
        .path()
        .join(format!("state/sandboxes/{}.json", sbx.r#ref.sandbox_id));
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    let pid = rec["leader"]["pid"].as_i64().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    let uids: Vec<u32> = uids[4..]
        .split_whitespace()
        .map(|u| u.parse().unwrap())
        .collect();
    assert!(
        !uids.contains(&4321),
        "the sandbox runs as the folder's owner: {uids:?}"
    );
    assert!(
        !uids.contains(&0),
        "the sandbox runs as host root: {uids:?}"
    );
    assert_eq!(std::fs::metadata(mine.join("f")).unwrap().uid(), uids[0]);
}

#[tokio::test]
async fn an_exec_cwd_tells_nothing_of_host_paths() {
    let h = Harness::start().await;
    let sbx = h.provision("p1").await;
    let grant = sbx.grant.clone().unwrap().token;
    let state = h.root.path().canonicalize().unwrap().join("state");
    let script = format!(
        "ln -s {} a && ln -s /nonexistent-sagents b",
        state.display()
    );
    h.sh(&sbx, &script).await.unwrap();
    let mut answers = Vec::new();
    for cwd in ["a", "b"] {
        let req = ExecRequest {
            cwd: Some(cwd.into()),
            ..exec_req("pwd")
        };
        match h.exec(&sbx, &grant, req).await {
            Err(ProviderCallError::Refused { status, error }) => {
                answers.push((status, error.code, error.message.replacen(cwd, "_", 1)))
            }
            other => panic!("{cwd}: expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(
        answers[0], answers[1],
        "an existing host folder answers differently"
    );
}

#[tokio::test]
async fn no_descriptor_of_a_host_folder_reaches_the_sandbox() {
    let h = Harness::start().await;
    for (key, s) in [
        ("i", spec(WorkspaceMode::Isolated, None)),
        ("a", active("fds")),
    ] {
        let sbx = h.provision_spec(key, s).await.unwrap();
        // A folder descriptor held by any process in the sandbox would lead, through `..`,
        // into the host's tree.
        let out = h
            .sh(
                &sbx,
                "for f in /proc/[0-9]*/fd/*; do [ -d \"$f\" ] && echo \"$f -> $(readlink $f)\"; done; echo done",
            )
            .await
            .unwrap();
        assert_eq!(out.stdout, "done\n", "{key}: {out:?}");
    }
}
