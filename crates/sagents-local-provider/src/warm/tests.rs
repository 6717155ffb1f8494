use std::os::unix::fs::PermissionsExt;

use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("trash")).unwrap();
        Fixture { _tmp: tmp, root }
    }

    fn cache(&self, budget: u64) -> WarmCache {
        WarmCache::open(&self.root, self.root.join("trash"), budget, |_| true).unwrap()
    }

    /// A sandbox-like folder `name` with files, an empty folder and a symlink.
    fn tree(&self, name: &str, bytes: usize) -> PathBuf {
        let d = self.root.join(name);
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::create_dir_all(d.join("empty")).unwrap();
        std::fs::write(d.join("a/b/f.txt"), "hello").unwrap();
        std::fs::write(d.join("big.bin"), vec![7u8; bytes]).unwrap();
        std::fs::set_permissions(d.join("a/b/f.txt"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        std::os::unix::fs::symlink("a/b/f.txt", d.join("link")).unwrap();
        d
    }

    fn target(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

const ID: &str = "ckp_1";
const DIGEST: Option<&str> = Some("sha256:abc");

#[test]
fn a_kept_tree_comes_back_whole_once() {
    let f = Fixture::new();
    let cache = f.cache(u64::MAX);
    let src = f.tree("sbx", 10_000);
    assert!(cache.keep(ID, DIGEST, &src));
    assert!(!src.exists(), "moved, not copied");
    assert_eq!(cache.stats().entries, 1);
    assert!(cache.stats().bytes >= 10_000);
    let out = f.target("restored");
    assert!(matches!(cache.take(ID, DIGEST, &out), Taken::Hit(_)));
    assert_eq!(std::fs::read(out.join("a/b/f.txt")).unwrap(), b"hello");
    assert_eq!(
        std::fs::read_link(out.join("link")).unwrap(),
        Path::new("a/b/f.txt")
    );
    assert!(out.join("empty").is_dir());
    assert_eq!(cache.take(ID, DIGEST, &f.target("again")), Taken::Miss);
    let s = cache.stats();
    assert_eq!(
        (s.hits, s.misses, s.fallbacks, s.entries, s.bytes),
        (1, 1, 0, 0, 0)
    );
    assert!(
        !f.root.join("warm").join(ID).exists(),
        "the entry is consumed"
    );
}

#[test]
fn any_change_to_a_kept_tree_drops_it() {
    type Change = fn(&Path);
    let changes: [(&str, Change); 7] = [
        ("a file's bytes", |t| {
            std::fs::write(t.join("a/b/f.txt"), "hello, world").unwrap()
        }),
        ("a file added", |t| {
            std::fs::write(t.join("a/new"), "").unwrap()
        }),
        ("a file removed", |t| {
            std::fs::remove_file(t.join("big.bin")).unwrap()
        }),
        ("an empty folder removed", |t| {
            std::fs::remove_dir(t.join("empty")).unwrap()
        }),
        ("a mode", |t| {
            std::fs::set_permissions(t.join("big.bin"), std::fs::Permissions::from_mode(0o600))
                .unwrap()
        }),
        ("a symlink retargeted", |t| {
            std::fs::remove_file(t.join("link")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", t.join("link")).unwrap();
        }),
        ("the manifest", |t| {
            std::fs::write(t.parent().unwrap().join(MANIFEST), "{not json").unwrap()
        }),
    ];
    for (what, change) in changes {
        let f = Fixture::new();
        let cache = f.cache(u64::MAX);
        assert!(cache.keep(ID, DIGEST, &f.tree("sbx", 100)));
        change(&f.root.join("warm").join(ID).join(TREE));
        let out = f.target("restored");
        assert!(
            matches!(cache.take(ID, DIGEST, &out), Taken::Fallback(_)),
            "{what}"
        );
        assert!(!out.exists(), "{what}: nothing is placed");
        assert_eq!(cache.stats().fallbacks, 1, "{what}");
        assert_eq!(cache.take(ID, DIGEST, &out), Taken::Miss, "{what}: dropped");
    }
}

#[test]
fn a_tree_for_another_digest_is_not_used() {
    let f = Fixture::new();
    let cache = f.cache(u64::MAX);
    assert!(cache.keep(ID, DIGEST, &f.tree("sbx", 100)));
    let out = f.target("restored");
    assert!(matches!(
        cache.take(ID, Some("sha256:other"), &out),
        Taken::Fallback(_)
    ));
    assert!(!out.exists());
}

#[test]
fn what_an_archive_would_not_give_back_as_is_is_not_kept() {
    type Odd = fn(&Path);
    let odd: [(&str, Odd); 4] = [
        ("a hard link", |t| {
            std::fs::hard_link(t.join("big.bin"), t.join("hl")).unwrap()
        }),
        ("a fifo", |t| {
            let c = std::ffi::CString::new(t.join("pipe").as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }),
        ("a set-uid file", |t| {
            std::fs::set_permissions(t.join("big.bin"), std::fs::Permissions::from_mode(0o4755))
                .unwrap()
        }),
        ("a time before 1970", |t| {
            let f = std::fs::File::options()
                .write(true)
                .open(t.join("big.bin"))
                .unwrap();
            let before = std::time::UNIX_EPOCH - std::time::Duration::from_secs(86_400);
            f.set_modified(before).unwrap();
        }),
    ];
    for (what, make) in odd {
        let f = Fixture::new();
        let cache = f.cache(u64::MAX);
        let src = f.tree("sbx", 100);
        make(&src);
        assert!(cache.keep(ID, DIGEST, &src), "{what}: taken care of");
        assert_eq!(cache.stats().entries, 0, "{what}");
        assert_eq!(
            cache.take(ID, DIGEST, &f.target("r")),
            Taken::Miss,
            "{what}"
        );
    }
}

#[test]
fn the_oldest_trees_go_first_to_stay_within_the_budget() {
    let f = Fixture::new();
    let one = {
        let probe = f.cache(u64::MAX);
        assert!(probe.keep("ckp_probe", DIGEST, &f.tree("probe", 50_000)));
        probe.stats().bytes
    };
    let cache = f.cache(one * 2 + one / 2);
    assert_eq!(
        cache.stats().entries,
        1,
        "the probe was kept across the reopen"
    );
    cache.forget("ckp_probe");
    assert!(!f.root.join("warm/ckp_probe").exists());
    for i in 0..3 {
        assert!(cache.keep(
            &format!("ckp_{i}"),
            DIGEST,
            &f.tree(&format!("s{i}"), 50_000)
        ));
    }
    let s = cache.stats();
    assert_eq!((s.entries, s.evictions), (2, 1));
    assert!(s.bytes <= s.budget_bytes);
    assert_eq!(cache.take("ckp_0", DIGEST, &f.target("r0")), Taken::Miss);
    assert!(matches!(
        cache.take("ckp_2", DIGEST, &f.target("r2")),
        Taken::Hit(_)
    ));
    let small = Fixture::new();
    let tiny = small.cache(4096);
    let src = small.tree("sbx", 100_000);
    assert!(
        tiny.keep(ID, DIGEST, &src),
        "larger than the budget: discarded"
    );
    assert_eq!(tiny.stats().entries, 0);
}

#[test]
fn a_start_keeps_only_what_it_can_check() {
    let f = Fixture::new();
    let cache = f.cache(u64::MAX);
    for id in ["ckp_a", "ckp_b", "ckp_c"] {
        assert!(cache.keep(id, DIGEST, &f.tree(id, 100)));
    }
    std::fs::remove_file(f.root.join("warm/ckp_c").join(MANIFEST)).unwrap();
    drop(cache);
    let again =
        WarmCache::open(&f.root, f.root.join("trash"), u64::MAX, |id| id != "ckp_b").unwrap();
    assert_eq!(again.stats().entries, 1);
    assert!(!f.root.join("warm/ckp_b").exists() && !f.root.join("warm/ckp_c").exists());
    assert!(matches!(
        again.take("ckp_a", DIGEST, &f.target("r")),
        Taken::Hit(_)
    ));
    assert!(again.keep("ckp_d", DIGEST, &f.tree("d", 100)));
    drop(again);
    let off = f.cache(0);
    assert!(!off.enabled());
    assert!(
        !off.keep("ckp_e", DIGEST, &f.tree("e", 100)),
        "off: the caller discards"
    );
    assert!(std::fs::read_dir(f.root.join("warm"))
        .unwrap()
        .next()
        .is_none());
}
