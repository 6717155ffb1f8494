//! Checkpoints over shared blobs, in process, at 10 and 100 MiB (1,000 files): a first
//! suspend against today's archive (`archive::pack`) and the `tar | zstd -3` floor, a
//! repeat suspend after a restore with 1 % of the files changed (time and bytes as a share
//! of the first), and a restore against the floor's `zstd -d | tar -x`.

use std::path::Path;
use std::time::Instant;

use sagents_local_provider::chunks::{self, index::Index, Base, Blobs};

use super::{median, ms, settle_disk, sh, text_tree};

struct Row {
    floor_pack: f64,
    archive: f64,
    first: f64,
    repeat: f64,
    repeat_bytes: f64,
    restore: f64,
    floor_unpack: f64,
}

fn one(work: &Path, total: usize, run: usize) -> Row {
    let tree = work.join(format!("tree-{total}-{run}"));
    text_tree(&tree, 1000, total / 1000, run as u64);
    let floor = work.join("floor.tar.zst");
    settle_disk();
    let t = Instant::now();
    sh(
        &format!("tar -cf - . | zstd -3 -q > {}", floor.display()),
        &tree,
    );
    let floor_pack = ms(t.elapsed());
    settle_disk();
    let t = Instant::now();
    sagents_local_provider::archive::pack(&tree, &work.join("today.tar.zst")).unwrap();
    let archive = ms(t.elapsed());

    let store = work.join(format!("store-{total}-{run}"));
    let blobs = Blobs::new(store.join("blobs")).unwrap();
    settle_disk();
    let t = Instant::now();
    let full = chunks::write(&blobs, &tree, &store.join("c1.manifest"), None).unwrap();
    let first = ms(t.elapsed());

    let back = work.join(format!("back-{total}-{run}"));
    std::fs::create_dir(&back).unwrap();
    settle_disk();
    let t = Instant::now();
    let written = chunks::restore(
        &blobs,
        &store.join("c1.manifest"),
        &back,
        Some(&full.digest),
    )
    .unwrap();
    let restore = ms(t.elapsed());
    let index = Index::settle("c1", &back, written);
    for i in (0..1000).step_by(100) {
        let p = back.join(format!("d{:02}/f{i:04}.txt", i % 20));
        let mut body = std::fs::read(&p).unwrap();
        body[0] ^= 1;
        std::fs::write(p, body).unwrap();
    }
    let base = Base {
        manifest: store.join("c1.manifest"),
        index,
    };
    settle_disk();
    let t = Instant::now();
    let again = chunks::write(&blobs, &back, &store.join("c2.manifest"), Some(base)).unwrap();
    let repeat = ms(t.elapsed());
    assert_eq!(again.files_read, 10);

    let out = work.join(format!("floor-out-{total}-{run}"));
    std::fs::create_dir(&out).unwrap();
    settle_disk();
    let t = Instant::now();
    sh(
        &format!("zstd -d -q -c {} | tar -xf -", floor.display()),
        &out,
    );
    let floor_unpack = ms(t.elapsed());
    for d in [&tree, &back, &out, &store] {
        std::fs::remove_dir_all(d).unwrap();
    }
    Row {
        floor_pack,
        archive,
        first,
        repeat,
        repeat_bytes: again.new_bytes as f64 / full.new_bytes as f64,
        restore,
        floor_unpack,
    }
}

pub fn run(runs: usize) {
    let work = tempfile::tempdir().unwrap();
    for total in [10 << 20, 100 << 20] {
        let rows: Vec<Row> = (0..runs).map(|r| one(work.path(), total, r)).collect();
        let m = |f: fn(&Row) -> f64| median(rows.iter().map(f).collect());
        let (fp, ar, fi, re) = (
            m(|r| r.floor_pack),
            m(|r| r.archive),
            m(|r| r.first),
            m(|r| r.repeat),
        );
        let (rb, rs, fu) = (
            m(|r| r.repeat_bytes),
            m(|r| r.restore),
            m(|r| r.floor_unpack),
        );
        println!(
            "checkpoint {} MiB, 1000 files, {runs} runs, medians: first {fi:.1} ms (archive {ar:.1} ms, x{:.2}; floor tar|zstd {fp:.1} ms, x{:.2}); \
             repeat at 1 % {re:.1} ms ({:.1} % of the first's time, {:.1} % of its bytes); restore {rs:.1} ms (floor zstd -d|tar -x {fu:.1} ms, x{:.2})",
            total >> 20,
            fi / ar,
            fi / fp,
            100.0 * re / fi,
            100.0 * rb,
            rs / fu
        );
    }
}
