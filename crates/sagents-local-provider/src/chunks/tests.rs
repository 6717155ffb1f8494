use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::checkpoints::{bring_back, delete, remember, take};
use crate::archive::UnpackError;
use crate::state::{CheckpointFormat, Layout, StoredCheckpoint};
use sagents_plugin_api::wire::CheckpointRef;

/// Everything a restore must bring back, by path: kind, mode, mtime, content or target.
fn tree_of(dir: &Path) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    for e in walkdir(dir) {
        let m = std::fs::symlink_metadata(&e).unwrap();
        let rel = e.strip_prefix(dir).unwrap().as_os_str().as_bytes().to_vec();
        let what = if m.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&e).unwrap())
        } else if m.is_dir() {
            format!("dir {:o} {}", m.mode() & 0o7777, m.mtime())
        } else {
            use sha2::Digest;
            let body = sha2::Sha256::digest(std::fs::read(&e).unwrap());
            format!("file {:o} {} {body:x}", m.mode() & 0o7777, m.mtime())
        };
        out.insert(rel, what);
    }
    out
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        out.push(p.clone());
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walkdir(&p));
        }
    }
    out
}

fn set_mtime(p: &Path, secs: i64) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    // SAFETY: valid path and two timespecs.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) };
    assert_eq!(rc, 0);
}

/// A tree with the awkward cases: odd names, modes, a big file, links, empty folders.
fn awkward_tree(dir: &Path) {
    let odd = OsString::from_vec(b"sp ace\n%25\xff\x01name".to_vec());
    std::fs::create_dir_all(dir.join("a/b/empty")).unwrap();
    std::fs::create_dir(dir.join(&odd)).unwrap();
    std::fs::write(dir.join(&odd).join(&odd), b"odd").unwrap();
    std::fs::write(dir.join("a/b/f.txt"), b"hello").unwrap();
    std::fs::write(dir.join("empty-file"), b"").unwrap();
    std::fs::write(dir.join("same1"), b"twin").unwrap();
    std::fs::write(dir.join("same2"), b"twin").unwrap();
    let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("a/big.bin"), big).unwrap();
    std::fs::write(dir.join("script.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(dir.join("script.sh"), PermissionsExt::from_mode(0o751)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("a/b", dir.join("dir-link")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("a/dangling")).unwrap();
    std::fs::set_permissions(dir.join("a/b/empty"), PermissionsExt::from_mode(0o500)).unwrap();
    for (i, p) in ["a/b/f.txt", "a/big.bin", "script.sh", "a/b/empty", "a"]
        .iter()
        .enumerate()
    {
        set_mtime(&dir.join(p), 1_600_000_000 + i as i64);
    }
}

struct Host {
    _root: tempfile::TempDir,
    layout: Layout,
}

impl Host {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path()).unwrap();
        Host {
            _root: root,
            layout,
        }
    }

    /// Takes a checkpoint of `dir` for `sandbox` and records it.
    fn take(&self, dir: &Path, id: &str, sandbox: &str) -> (StoredCheckpoint, super::Written) {
        let w = take(&self.layout, dir, id, sandbox).unwrap();
        let stored = StoredCheckpoint {
            checkpoint: CheckpointRef {
                checkpoint_id: id.into(),
                provider_id: "local".into(),
                sandbox_id: sandbox.into(),
                generation: 1,
                size_bytes: w.new_bytes,
                digest: Some(w.digest.clone()),
                created_at: chrono::Utc::now(),
            },
            labels: None,
            format: CheckpointFormat::Manifest,
        };
        self.layout.save_checkpoint(&stored).unwrap();
        (stored, w)
    }

    fn restore(&self, c: &StoredCheckpoint, sandbox: &str) -> tempfile::TempDir {
        let dst = tempfile::tempdir().unwrap();
        let written = bring_back(&self.layout, c, dst.path()).unwrap();
        remember(
            &self.layout,
            sandbox,
            &c.checkpoint.checkpoint_id,
            dst.path(),
            written,
            false,
        );
        dst
    }

    fn blob_bytes(&self) -> u64 {
        crate::archive::disk_usage(self.layout.blobs.dir())
            + std::fs::read_dir(self.layout.archives())
                .unwrap()
                .flatten()
                .map(|e| e.metadata().unwrap().blocks() * 512)
                .sum::<u64>()
    }
}

#[test]
fn a_restore_brings_back_exactly_the_tree_an_archive_would() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    let (stored, _) = host.take(src.path(), "ckp_1", "sbx_1");
    let from_chunks = host.restore(&stored, "sbx_2");
    let store = tempfile::tempdir().unwrap();
    let archive = store.path().join("c.tar.zst");
    let info = crate::archive::pack(src.path(), &archive).unwrap();
    let from_archive = tempfile::tempdir().unwrap();
    crate::archive::unpack(&archive, from_archive.path(), Some(&info.digest)).unwrap();
    let want = tree_of(src.path());
    assert_eq!(tree_of(from_chunks.path()), want);
    assert_eq!(tree_of(from_archive.path()), want);
    assert!(want.len() >= 14, "{want:?}");
}

#[test]
fn the_digest_is_that_of_the_canonical_manifest_and_stable() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    let (a, _) = host.take(src.path(), "ckp_1", "sbx_1");
    let (b, again) = host.take(src.path(), "ckp_2", "sbx_1");
    assert_eq!(a.checkpoint.digest, b.checkpoint.digest);
    let canonical = super::read_manifest(&host.layout.manifest("ckp_2")).unwrap();
    assert_eq!(
        Some(super::manifest::digest(&canonical)),
        b.checkpoint.digest
    );
    let small = super::manifest::encode(&[]).len() as u64;
    assert!(again.new_bytes < small + 2000, "only a manifest: {again:?}");
}

/// Source-like text: words and random hex numbers, compressing about as well as code.
fn text(rng: &mut impl rand::Rng, len: usize) -> Vec<u8> {
    let words = [
        "fn", "let", "match", "return", "self", "impl", "{", "}", "=>", "agent",
    ];
    let mut buf = Vec::with_capacity(len + 24);
    while buf.len() < len {
        if rng.gen_ratio(1, 4) {
            buf.extend_from_slice(format!("{:x} ", rng.gen::<u64>()).as_bytes());
        } else {
            buf.extend_from_slice(words[rng.gen_range(0..words.len())].as_bytes());
            buf.push(if rng.gen_ratio(1, 8) { b'\n' } else { b' ' });
        }
    }
    buf.truncate(len);
    buf
}

/// 1,000 files of 10 KiB, 10 suspends each changing 1 % of them.
#[test]
fn repeat_suspends_write_what_changed_and_ten_cost_little_more_than_one_archive() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let host = Host::new();
    let mut dir = tempfile::tempdir().unwrap();
    for i in 0..1000u32 {
        let sub = dir.path().join(format!("d{:02}", i % 20));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i:04}")), text(&mut rng, 10_240)).unwrap();
    }
    let store = tempfile::tempdir().unwrap();
    let full = crate::archive::pack(dir.path(), &store.path().join("a.tar.zst"))
        .unwrap()
        .size_bytes;
    let mut kept = Vec::new();
    let mut sandbox = "sbx_0".to_string();
    for round in 0..10u32 {
        if round > 0 {
            for k in 0..10u32 {
                let i = (round * 10 + k) * 7 % 1000;
                let p = dir.path().join(format!("d{:02}/f{i:04}", i % 20));
                std::fs::write(p, text(&mut rng, 10_240)).unwrap();
            }
        }
        let (stored, w) = host.take(dir.path(), &format!("ckp_{round}"), &sandbox);
        if round > 0 {
            assert_eq!(w.files_read, 10, "only the changed files are read");
            assert!(
                w.new_bytes * 20 <= full,
                "round {round}: {} B written, full archive {full} B",
                w.new_bytes
            );
        }
        kept.push((stored, tree_of(dir.path())));
        sandbox = format!("sbx_{}", round + 1);
        dir = host.restore(&kept[round as usize].0, &sandbox);
    }
    let used = host.blob_bytes();
    assert!(
        used * 2 <= full * 3,
        "10 checkpoints take {used} B, one archive {full} B"
    );

    let mut deleted = Vec::new();
    for gone in [4usize, 0, 9] {
        assert!(delete(&host.layout, &format!("ckp_{gone}")).unwrap());
        assert!(!delete(&host.layout, &format!("ckp_{gone}")).unwrap());
        deleted.push(gone);
        for (i, (stored, tree)) in kept.iter().enumerate() {
            if deleted.contains(&i) {
                continue;
            }
            let back = tempfile::tempdir().unwrap();
            bring_back(&host.layout, stored, back.path()).unwrap();
            assert_eq!(
                &tree_of(back.path()),
                tree,
                "ckp_{i} after deleting ckp_{gone}"
            );
        }
    }
    for i in [1, 2, 3, 5, 6, 7, 8] {
        delete(&host.layout, &format!("ckp_{i}")).unwrap();
    }
    assert!(host.layout.blobs.all().unwrap().is_empty(), "all freed");
}

#[test]
fn a_corrupt_or_missing_blob_or_manifest_is_told_apart() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    let (stored, _) = host.take(src.path(), "ckp_1", "sbx_1");
    let blobs = host.layout.blobs.all().unwrap();
    assert!(blobs.len() >= 2, "a pack and the big file's own blob");
    for h in &blobs {
        let path = host.layout.blobs.path(h);
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        std::fs::write(&path, &bad).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let got = bring_back(&host.layout, &stored, dst.path());
        assert!(matches!(got, Err(UnpackError::DigestMismatch)), "{got:?}");
        std::fs::remove_file(&path).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let got = bring_back(&host.layout, &stored, dst.path());
        assert!(
            matches!(&got, Err(UnpackError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound),
            "{got:?}"
        );
        std::fs::write(&path, &good).unwrap();
    }
    let mut wrong = stored.clone();
    wrong.checkpoint.digest = Some(format!("sha256:{}", "0".repeat(64)));
    let dst = tempfile::tempdir().unwrap();
    let got = bring_back(&host.layout, &wrong, dst.path());
    assert!(matches!(got, Err(UnpackError::DigestMismatch)), "{got:?}");
}

#[test]
fn a_crafted_manifest_is_refused_and_writes_nothing_outside() {
    use super::manifest::{encode, Entry, Place};
    let host = Host::new();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().as_os_str().to_owned();
    let file = |p: &str| Entry::File {
        path: p.into(),
        mode: 0o644,
        mtime: 0,
        size: 0,
        hash: [0; 32],
        place: Place::Own,
    };
    let dir = |p: &str| Entry::Dir {
        path: p.into(),
        mode: 0o755,
        mtime: 0,
    };
    let link = |p: &str, t: &std::ffi::OsStr| Entry::Link {
        path: p.into(),
        target: t.to_owned(),
    };
    let mut abs = o.clone();
    abs.push("/x");
    let deep = vec!["d"; crate::paths::MAX_DEPTH + 2].join("/");
    let cases: Vec<Vec<Entry>> = vec![
        vec![Entry::File {
            path: abs,
            mode: 0o644,
            mtime: 0,
            size: 0,
            hash: [0; 32],
            place: Place::Own,
        }],
        vec![file("../esc")],
        vec![dir("a"), file("a/../../esc")],
        vec![link("l", &o), file("l/x")],
        vec![link("l", &o), dir("l")],
        vec![file("f"), file("f")],
        vec![file("nodir/f")],
        vec![dir("a"), file("a//f")],
        vec![file("./f")],
        vec![file("")],
        vec![dir(&deep)],
    ];
    for entries in cases {
        let canonical = encode(&entries);
        let compressed = zstd::encode_all(&canonical[..], 3).unwrap();
        std::fs::write(host.layout.manifest("ckp_x"), compressed).unwrap();
        let stored = StoredCheckpoint {
            checkpoint: CheckpointRef {
                checkpoint_id: "ckp_x".into(),
                provider_id: "local".into(),
                sandbox_id: "sbx".into(),
                generation: 1,
                size_bytes: 0,
                digest: Some(super::manifest::digest(&canonical)),
                created_at: chrono::Utc::now(),
            },
            labels: None,
            format: CheckpointFormat::Manifest,
        };
        let dst = tempfile::tempdir().unwrap();
        let got = bring_back(&host.layout, &stored, dst.path());
        assert!(
            matches!(got, Err(UnpackError::Unsafe(_))),
            "{entries:?}: {got:?}"
        );
        assert_eq!(std::fs::read_dir(dst.path()).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}

#[test]
fn a_start_sweeps_what_a_crash_left_and_keeps_what_checkpoints_need() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    let (stored, _) = host.take(src.path(), "ckp_1", "sbx_1");
    let needed = host.layout.blobs.all().unwrap();
    std::fs::write(src.path().join("new"), b"only in the unrecorded one").unwrap();
    take(&host.layout, src.path(), "ckp_2", "sbx_1").unwrap();
    let stray = host.layout.blobs.dir().join("tmp/x.partial");
    std::fs::write(&stray, b"half").unwrap();
    assert!(host.layout.blobs.all().unwrap().len() > needed.len());
    let again = Layout::new(host.layout.root.as_path()).unwrap();
    again.remove_partial_archives().unwrap();
    let mut left = again.blobs.all().unwrap();
    let mut want = needed;
    left.sort();
    want.sort();
    assert_eq!(left, want, "the unrecorded checkpoint's blob is swept");
    assert!(!again.manifest("ckp_2").exists() && !stray.exists());
    let dst = tempfile::tempdir().unwrap();
    bring_back(&again, &stored, dst.path()).unwrap();
    assert_eq!(tree_of(dst.path()), {
        std::fs::remove_file(src.path().join("new")).unwrap();
        tree_of(src.path())
    });
}

#[test]
fn a_manifest_that_cannot_be_read_keeps_every_blob() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    host.take(src.path(), "ckp_1", "sbx_1");
    host.take(src.path(), "ckp_2", "sbx_2");
    let before = host.layout.blobs.all().unwrap().len();
    // A damaged manifest (or one of a format a later build writes) names nothing it can tell.
    std::fs::write(host.layout.manifest("ckp_2"), b"not a manifest").unwrap();
    assert!(delete(&host.layout, "ckp_1").unwrap());
    assert_eq!(
        host.layout.blobs.all().unwrap().len(),
        before,
        "a delete sweeps nothing"
    );
    let again = Layout::new(host.layout.root.as_path()).unwrap();
    again.remove_partial_archives().unwrap();
    assert_eq!(again.blobs.all().unwrap().len(), before, "nor does a start");
}

#[test]
fn a_workspace_of_endless_long_paths_is_refused_before_it_costs_memory() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    let mut deep = src.path().to_path_buf();
    for level in 0..10 {
        deep = deep.join(format!("{level}{}", "n".repeat(200)));
    }
    std::fs::create_dir_all(&deep).unwrap();
    for i in 0..40 {
        std::fs::write(deep.join(format!("f{i}")), b"x").unwrap();
    }
    let err = take(&host.layout, src.path(), "ckp_1", "sbx_1").unwrap_err();
    assert!(err.to_string().contains("paths add up"), "{err}");
    assert!(!host.layout.manifest("ckp_1").exists());
}

#[test]
fn an_unchanged_file_whose_blob_went_missing_is_written_again() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    let (first, _) = host.take(src.path(), "ckp_1", "sbx_1");
    let back = host.restore(&first, "sbx_2");
    for blob in host.layout.blobs.all().unwrap() {
        std::fs::remove_file(host.layout.blobs.path(&blob)).unwrap();
    }
    let (second, w) = host.take(back.path(), "ckp_2", "sbx_2");
    assert!(w.files_read > 0, "nothing named that is not there");
    let dst = tempfile::tempdir().unwrap();
    bring_back(&host.layout, &second, dst.path()).unwrap();
    assert_eq!(tree_of(dst.path()), tree_of(src.path()));
}

#[test]
fn a_time_a_tenant_sets_centuries_ahead_is_fingerprinted_without_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("late")).unwrap();
    let late = std::time::UNIX_EPOCH + std::time::Duration::new(10_000_000_000, 500_000_000);
    f.set_modified(late).unwrap();
    let meta = std::fs::symlink_metadata(dir.path().join("late")).unwrap();
    assert_eq!(super::index::Fingerprint::of(&meta).mtime_ns, i64::MAX);
}

#[test]
fn a_tree_kept_warm_and_renamed_back_is_suspended_again_without_reading_it() {
    let host = Host::new();
    let src = tempfile::tempdir().unwrap();
    awkward_tree(src.path());
    host.take(src.path(), "ckp_1", "sbx_1");
    // The kept tree is the checkpoint's files as they are: its fingerprints are recorded.
    let written = fingerprints(src.path());
    assert!(!written.is_empty());
    remember(&host.layout, "sbx_2", "ckp_1", src.path(), written, true);
    let (_, w) = host.take(src.path(), "ckp_2", "sbx_2");
    assert_eq!(w.files_read, 0, "every file reused by its fingerprint");
}

/// The fingerprints of the regular files under `dir`, by path relative to it.
fn fingerprints(dir: &Path) -> super::WrittenFiles {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(dir.join(&rel)).unwrap().flatten() {
            let path = rel.join(e.file_name());
            let meta = std::fs::symlink_metadata(dir.join(&path)).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                out.push((path.into_os_string(), super::index::Fingerprint::of(&meta)));
            }
        }
    }
    out
}
