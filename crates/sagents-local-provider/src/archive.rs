//! Snapshots as archives: tar + zstd, in process, with a SHA-256 digest of the stored file.

pub(crate) mod extract;
pub(crate) mod walk;

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::paths::OpenDir;

/// zstd level shared with the command-line floor the benchmark compares against.
pub const ZSTD_LEVEL: i32 = 3;
const BUF: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveInfo {
    pub size_bytes: u64,
    /// `sha256:` + hex of the archive file.
    pub digest: String,
}

struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// The bytes the files under `dir` take (allocated blocks), without following symlinks; all
/// of `u64` when they cannot be counted (nested too deep), so no quota is evaded that way.
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(root) = OpenDir::open(dir) else {
        return 0;
    };
    let children = walk::usage(root.fd.as_fd(), 0).unwrap_or(u64::MAX);
    File::from(root.fd)
        .metadata()
        .map(|m| m.blocks().saturating_mul(512))
        .unwrap_or(0)
        .saturating_add(children)
}

/// Archives the contents of `dir` into `out` (written to a temporary name, synced, then
/// renamed into place). The tree is walked by descriptor: symlinks are stored as links and
/// never followed, even when one replaces a file or folder during the walk; devices, fifos
/// and sockets are left out.
pub fn pack(dir: &Path, out: &Path) -> io::Result<ArchiveInfo> {
    let tmp = out.with_extension("partial");
    let result = pack_to(dir, &tmp).and_then(|info| {
        std::fs::rename(&tmp, out)?;
        Ok(info)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn pack_to(dir: &Path, tmp: &Path) -> io::Result<ArchiveInfo> {
    let file = super::state::private_file(tmp)?;
    let hashing = HashingWriter {
        inner: BufWriter::with_capacity(BUF, file),
        hasher: Sha256::new(),
        written: 0,
    };
    let mut encoder = zstd::stream::Encoder::new(hashing, ZSTD_LEVEL)?;
    encoder.include_checksum(false)?;
    let mut builder = tar::Builder::new(encoder);
    let root = OpenDir::open(dir)?;
    walk::pack_tree(&mut builder, root.fd.as_fd(), Path::new(""))?;
    let encoder = builder.into_inner()?;
    let mut hashing = encoder.finish()?;
    hashing.flush()?;
    let digest = format!("sha256:{}", hex::encode(hashing.hasher.finalize()));
    let file = hashing.inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(ArchiveInfo {
        size_bytes: hashing.written,
        digest,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("reading the checkpoint failed: {0}")]
    Io(#[from] io::Error),
    #[error("the checkpoint archive does not match its digest")]
    DigestMismatch,
    #[error("the checkpoint holds an entry that cannot be restored safely: {0}")]
    Unsafe(String),
    #[error("the checkpoint archive cannot be read: {0}")]
    Malformed(String),
}

/// Chunks from the decompressing thread, read as one stream by the unpacking thread.
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Reads, hashes and decompresses `archive` on its own thread; returns the digest.
fn decompress_into(
    archive: &Path,
    tx: std::sync::mpsc::SyncSender<io::Result<Vec<u8>>>,
) -> io::Result<String> {
    let file = File::open(archive)?;
    let mut hashing = HashingReader {
        inner: file,
        hasher: Sha256::new(),
    };
    {
        let mut decoder =
            zstd::stream::Decoder::with_buffer(BufReader::with_capacity(BUF, &mut hashing))?;
        loop {
            let mut chunk = vec![0u8; BUF];
            let n = decoder.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            chunk.truncate(n);
            if tx.send(Ok(chunk)).is_err() {
                break;
            }
        }
    }
    io::copy(&mut hashing, &mut io::sink())?;
    Ok(format!("sha256:{}", hex::encode(hashing.hasher.finalize())))
}

/// Unpacks `archive` into `dir` (which must exist), checking the archive against `digest`.
/// Decompression and file writing run on two threads, like `zstd -d | tar -x`. Every entry
/// is written by descriptor beneath `dir`; one that would leave it is refused (see
/// [`extract`]).
pub fn unpack(archive: &Path, dir: &Path, digest: Option<&str>) -> Result<(), UnpackError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    let source = archive.to_path_buf();
    let decompressor = std::thread::spawn(move || {
        let result = decompress_into(&source, tx.clone());
        if let Err(e) = &result {
            let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string())));
        }
        result
    });
    let mut tar = tar::Archive::new(ChannelReader {
        rx,
        chunk: Vec::new(),
        pos: 0,
    });
    let unpacked = OpenDir::open(dir)
        .map_err(UnpackError::from)
        .and_then(|root| extract::extract(&mut tar, root.fd.as_fd()));
    // Dropping the reader lets a still-sending decompressor stop.
    drop(tar);
    let decompressed = decompressor
        .join()
        .map_err(|_| io::Error::other("the decompressing thread panicked"))?;
    let got = match decompressed {
        Ok(got) => got,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e.into()),
        Err(e) => {
            let mismatch = digest.is_some_and(|want| file_digest(archive).is_ok_and(|g| g != want));
            return Err(match mismatch {
                true => UnpackError::DigestMismatch,
                false => UnpackError::Malformed(e.to_string()),
            });
        }
    };
    match digest {
        Some(want) if want != got => Err(UnpackError::DigestMismatch),
        _ => unpacked,
    }
}

fn file_digest(path: &Path) -> io::Result<String> {
    let mut hashing = HashingReader {
        inner: File::open(path)?,
        hasher: Sha256::new(),
    };
    io::copy(&mut hashing, &mut io::sink())?;
    Ok(format!("sha256:{}", hex::encode(hashing.hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_back_byte_for_byte() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("a/b")).unwrap();
        std::fs::write(src.path().join("a/b/file.txt"), b"hello").unwrap();
        std::fs::write(src.path().join("top.bin"), vec![7u8; 100_000]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let store = tempfile::tempdir().unwrap();
        let out = store.path().join("c.tar.zst");
        let info = pack(src.path(), &out).unwrap();
        assert_eq!(info.size_bytes, std::fs::metadata(&out).unwrap().len());
        assert!(info.size_bytes < 100_000);
        let dst = tempfile::tempdir().unwrap();
        unpack(&out, dst.path(), Some(&info.digest)).unwrap();
        assert_eq!(
            std::fs::read(dst.path().join("a/b/file.txt")).unwrap(),
            b"hello"
        );
        assert_eq!(
            std::fs::read(dst.path().join("top.bin")).unwrap().len(),
            100_000
        );
        assert_eq!(
            std::fs::read_link(dst.path().join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
    }

    #[test]
    fn a_corrupted_archive_is_detected() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("f"), b"data").unwrap();
        let store = tempfile::tempdir().unwrap();
        let out = store.path().join("c.tar.zst");
        pack(src.path(), &out).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let wrong = format!("sha256:{}", "0".repeat(64));
        assert!(matches!(
            unpack(&out, dst.path(), Some(&wrong)),
            Err(UnpackError::DigestMismatch)
        ));
    }

    /// An archive with entries as given, names written raw (no checks by the builder).
    fn crafted(entries: &[(&str, tar::EntryType, &str)]) -> tempfile::TempDir {
        let store = tempfile::tempdir().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, body) in entries {
            let mut h = tar::Header::new_old();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            let data = match kind.is_symlink() || kind.is_hard_link() {
                true => {
                    h.as_old_mut().linkname[..body.len()].copy_from_slice(body.as_bytes());
                    &b""[..]
                }
                false => body.as_bytes(),
            };
            h.set_size(data.len() as u64);
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        let tar = b.into_inner().unwrap();
        let zst = zstd::encode_all(&tar[..], 3).unwrap();
        std::fs::write(store.path().join("c.tar.zst"), zst).unwrap();
        store
    }

    #[test]
    fn entries_that_would_leave_the_target_are_refused() {
        use tar::EntryType as E;
        let outside = tempfile::tempdir().unwrap();
        let o = outside.path().display().to_string();
        let abs = format!("{o}/abs");
        let through = o.clone();
        let climb = format!("../../../../../../..{abs}");
        let cases: Vec<Vec<(&str, E, &str)>> = vec![
            vec![(&abs, E::Regular, "x")],
            vec![(&climb, E::Regular, "x")],
            vec![("a/../../esc", E::Regular, "x")],
            vec![
                ("link", E::Symlink, &through),
                ("link/through", E::Regular, "x"),
            ],
            vec![("link", E::Symlink, &through), ("link", E::Directory, "")],
            vec![("link", E::Symlink, &through), ("link", E::Regular, "x")],
            vec![("hl", E::Link, "/etc/passwd")],
            vec![("f", E::Regular, "x"), ("hl", E::Link, "f")],
            vec![("null", E::Char, "")],
            vec![("disk", E::Block, "")],
            vec![("pipe", E::Fifo, "")],
            vec![("f", E::Regular, "x"), ("f", E::Regular, "y")],
        ];
        for entries in cases {
            let store = crafted(&entries);
            let dst = tempfile::tempdir().unwrap();
            let got = unpack(&store.path().join("c.tar.zst"), dst.path(), None);
            assert!(
                matches!(got, Err(UnpackError::Unsafe(_))),
                "{entries:?}: {got:?}"
            );
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        }
        assert!(!dst_parent_has("esc"));
    }

    fn dst_parent_has(name: &str) -> bool {
        std::env::temp_dir().join(name).exists()
    }

    #[test]
    fn endless_nesting_stops_the_walk_with_an_error() {
        let src = tempfile::tempdir().unwrap();
        let deep =
            (0..=crate::paths::MAX_DEPTH + 1).fold(src.path().to_path_buf(), |p, _| p.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        let store = tempfile::tempdir().unwrap();
        let err = pack(src.path(), &store.path().join("c.tar.zst")).unwrap_err();
        assert!(err.to_string().contains("nest deeper"), "{err}");
        assert_eq!(disk_usage(src.path()), u64::MAX);
        let name = vec!["d"; crate::paths::MAX_DEPTH + 2].join("/");
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        b.append_data(&mut h, &name, io::empty()).unwrap();
        let zst = zstd::encode_all(&b.into_inner().unwrap()[..], 3).unwrap();
        let store = tempfile::tempdir().unwrap();
        std::fs::write(store.path().join("c.tar.zst"), zst).unwrap();
        let dst = tempfile::tempdir().unwrap();
        let got = unpack(&store.path().join("c.tar.zst"), dst.path(), None);
        assert!(matches!(got, Err(UnpackError::Unsafe(_))), "{got:?}");
    }

    #[test]
    fn an_unreadable_archive_is_malformed_or_mismatched_never_an_io_error() {
        use sha2::Digest as _;
        let store = tempfile::tempdir().unwrap();
        let out = store.path().join("c.tar.zst");
        let garbage_tar = zstd::encode_all(&[0x55u8; 2048][..], 3).unwrap();
        for bytes in [b"not an archive".to_vec(), garbage_tar] {
            std::fs::write(&out, &bytes).unwrap();
            let right = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
            let dst = tempfile::tempdir().unwrap();
            let got = unpack(&out, dst.path(), Some(&right));
            assert!(matches!(got, Err(UnpackError::Malformed(_))), "{got:?}");
            let wrong = format!("sha256:{}", "0".repeat(64));
            let got = unpack(&out, dst.path(), Some(&wrong));
            assert!(matches!(got, Err(UnpackError::DigestMismatch)), "{got:?}");
        }
    }
}
