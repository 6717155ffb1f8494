//! Writing a checkpoint: the tree is walked by descriptor as for an archive (no link
//! followed, devices, fifos and sockets left out); a file whose fingerprint matches the base
//! index is taken from the base manifest unread, any other is read and hashed, and content
//! the store holds already is named, not written. Packs are compressed and written on a
//! pair of threads while the walk goes on.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc;

use sha2::{Digest, Sha256};

use super::index::{key, Fingerprint, Index};
use super::manifest::{self, Entry, Hash, Place};
use super::{Blobs, OWN_BLOB_MIN, PACK_TARGET};
use crate::archive::walk::{open_node, read_link, reopen, vanished};
use crate::paths::{read_names, too_deep, OpenDir, MAX_DEPTH};

/// The checkpoint a sandbox was restored from, with the fingerprints of what it wrote.
pub struct Base {
    pub manifest: std::path::PathBuf,
    pub index: Index,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `sha256:` + hex of the canonical manifest.
    pub digest: String,
    /// Bytes this checkpoint added to the provider's disk: new blobs and its manifest.
    pub new_bytes: u64,
    /// Files whose content was read (the others were reused by fingerprint).
    pub files_read: u64,
    /// The bytes of the files the checkpoint holds, whatever was written for them.
    pub logical_bytes: u64,
}

/// A pack being filled: its members' bytes, hashes and sizes, and the entries they serve.
#[derive(Default)]
struct Pack {
    data: Vec<u8>,
    members: Vec<(Hash, u64)>,
    entries: Vec<usize>,
}

impl Pack {
    fn name(&self) -> Hash {
        let mut h = Sha256::new();
        h.update(b"sagents-pack 1\n");
        for (hash, size) in &self.members {
            h.update(hash);
            h.update(size.to_le_bytes());
        }
        h.finalize().into()
    }
}

struct Walk<'a> {
    blobs: &'a Blobs,
    /// Fingerprint and (hash, place) of each base file, by escaped path.
    seen: HashMap<&'a str, Fingerprint>,
    base: HashMap<String, (Hash, Place)>,
    /// Where each content already stored or written by this walk lies.
    known: HashMap<Hash, Place>,
    entries: Vec<Entry>,
    pack: Pack,
    packs: mpsc::SyncSender<(Hash, Vec<u8>)>,
    new_bytes: u64,
    files_read: u64,
    /// The bytes of every path (and link target) held so far: what the manifest costs in memory.
    path_bytes: usize,
}

/// A workspace whose entries' paths and link targets add up to more cannot be checkpointed:
/// a tenant's long names at depth would otherwise cost the provider's memory without bound.
pub const MAX_PATH_BYTES: usize = if cfg!(test) {
    64 * 1024
} else {
    256 * 1024 * 1024
};

/// Writes the checkpoint of `dir` as the manifest `out` (through `out.partial`), with the
/// blobs it needs in `blobs`.
pub fn write(blobs: &Blobs, dir: &Path, out: &Path, base: Option<Base>) -> io::Result<Written> {
    let _shared = blobs.shared();
    let (base_index, base_entries) = match base.as_ref() {
        Some(b) => match super::read_manifest(&b.manifest).map(|m| manifest::decode(&m)) {
            Ok(Some(entries)) => (Some(&b.index), entries),
            _ => (None, Vec::new()),
        },
        None => (None, Vec::new()),
    };
    let mut known = HashMap::new();
    let mut by_path = HashMap::new();
    for e in base_entries {
        if let Entry::File {
            path, hash, place, ..
        } = e
        {
            known.insert(hash, place);
            by_path.insert(key(&path), (hash, place));
        }
    }
    let (tx, rx) = mpsc::sync_channel::<(Hash, Vec<u8>)>(2);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    // Two writers: compressing and syncing packs costs more than reading and hashing them.
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (blobs, rx) = (blobs.clone(), rx.clone());
            std::thread::spawn(move || -> io::Result<u64> {
                let mut written = 0;
                loop {
                    let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((name, data)) = next else { break };
                    if blobs.contains(&name) {
                        continue;
                    }
                    let compressed = zstd::bulk::compress(&data, crate::archive::ZSTD_LEVEL)?;
                    written += blobs.put(&name, &compressed)?;
                }
                Ok(written)
            })
        })
        .collect();
    let mut walk = Walk {
        blobs,
        seen: base_index.map(Index::by_path).unwrap_or_default(),
        base: by_path,
        known,
        entries: Vec::new(),
        pack: Pack::default(),
        packs: tx,
        new_bytes: 0,
        files_read: 0,
        path_bytes: 0,
    };
    let walked = OpenDir::open(dir).and_then(|root| {
        walk.dir(root.fd.as_fd(), Path::new(""), 0)?;
        walk.flush()
    });
    let Walk {
        entries,
        packs,
        new_bytes,
        files_read,
        ..
    } = walk;
    drop(packs);
    let mut packed = 0;
    for w in writers {
        packed += w
            .join()
            .map_err(|_| io::Error::other("a pack writer panicked"))??;
    }
    walked?;
    let canonical = manifest::encode(&entries);
    let compressed = zstd::bulk::compress(&canonical, crate::archive::ZSTD_LEVEL)?;
    let tmp = out.with_extension("manifest.partial");
    let placed = (|| {
        let mut f = crate::state::private_file(&tmp)?;
        io::Write::write_all(&mut f, &compressed)?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    })();
    if placed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    placed?;
    let logical_bytes = entries
        .iter()
        .map(|e| match e {
            Entry::File { size, .. } => *size,
            _ => 0,
        })
        .sum();
    Ok(Written {
        digest: manifest::digest(&canonical),
        new_bytes: new_bytes + packed + compressed.len() as u64,
        files_read,
        logical_bytes,
    })
}

impl Walk<'_> {
    fn held(&mut self, bytes: usize) -> io::Result<()> {
        self.path_bytes = self.path_bytes.saturating_add(bytes);
        if self.path_bytes > MAX_PATH_BYTES {
            return Err(io::Error::other(format!(
                "the workspace's paths add up to more than {} MiB",
                MAX_PATH_BYTES >> 20
            )));
        }
        Ok(())
    }

    fn dir(&mut self, dir: BorrowedFd<'_>, prefix: &Path, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let mut names = read_names(dir)?;
        names.sort();
        for name in names {
            let rel = prefix.join(&name);
            let node = match open_node(dir, &name) {
                Err(e) if vanished(&e) => continue,
                other => other?,
            };
            let meta = node.metadata()?;
            let kind = meta.file_type();
            let path = OsString::from(rel.as_os_str());
            self.held(path.len())?;
            let (mode, mtime) = (meta.mode() & 0o7777, meta.mtime().max(0) as u64);
            if kind.is_symlink() {
                let target = read_link(&node)?.into_os_string();
                self.held(target.len())?;
                self.entries.push(Entry::Link { path, target });
            } else if kind.is_dir() {
                let sub = reopen(&node, libc::O_RDONLY | libc::O_DIRECTORY)?;
                self.entries.push(Entry::Dir { path, mode, mtime });
                self.dir(sub.as_fd(), &rel, depth + 1)?;
            } else if kind.is_file() {
                self.file(&node, &meta, path, mode, mtime)?;
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        node: &File,
        meta: &std::fs::Metadata,
        path: OsString,
        mode: u32,
        mtime: u64,
    ) -> io::Result<()> {
        let size = meta.len();
        let k = key(&path);
        let unchanged = self.seen.get(k.as_str()) == Some(&Fingerprint::of(meta));
        let reused = self
            .base
            .get(&k)
            // A blob that went missing is written again rather than named.
            .filter(|(hash, place)| {
                let blob = match place {
                    Place::Own => hash,
                    Place::Pack(pack, _) => pack,
                };
                unchanged && self.blobs.contains(blob)
            })
            .copied();
        let (hash, place) = match reused {
            Some(found) => found,
            None => self.read_file(node, size)?,
        };
        self.entries.push(Entry::File {
            path,
            mode,
            mtime,
            size,
            hash,
            place,
        });
        if self.pack.data.len() >= PACK_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads a file's content: a large one becomes a blob of its own, a small one joins the
    /// pack being filled unless the same content is already stored.
    fn read_file(&mut self, node: &File, size: u64) -> io::Result<(Hash, Place)> {
        self.files_read += 1;
        let file = File::from(reopen(node, libc::O_RDONLY)?);
        if size >= OWN_BLOB_MIN {
            let (hash, written) = self.blobs.put_stream(file, size)?;
            self.new_bytes += written;
            return Ok((hash, Place::Own));
        }
        let mut body = Vec::with_capacity(size as usize);
        file.take(size)
            .chain(io::repeat(0))
            .take(size)
            .read_to_end(&mut body)?;
        let hash: Hash = Sha256::digest(&body).into();
        let stored = self.known.get(&hash).copied().filter(|place| match place {
            // A pack of this walk is not closed yet: it has no name and is still in hand.
            Place::Pack(pack, _) if *pack != [0; 32] => self.blobs.contains(pack),
            Place::Pack(..) => true,
            Place::Own => self.blobs.contains(&hash),
        });
        let place = match stored {
            Some(place) => place,
            None => {
                let offset = self.pack.data.len() as u64;
                self.pack.data.extend_from_slice(&body);
                self.pack.members.push((hash, size));
                // The entry pushed next is this one; the pack's name is known once it is closed.
                self.pack.entries.push(self.entries.len());
                Place::Pack([0; 32], offset)
            }
        };
        Ok((hash, place))
    }

    /// Closes the pack being filled: names it, points its entries at it, hands it over.
    fn flush(&mut self) -> io::Result<()> {
        if self.pack.members.is_empty() {
            return Ok(());
        }
        let pack = std::mem::take(&mut self.pack);
        let name = pack.name();
        for &i in &pack.entries {
            if let Entry::File { hash, place, .. } = &mut self.entries[i] {
                if let Place::Pack(p, _) = place {
                    *p = name;
                }
                self.known.insert(*hash, *place);
            }
        }
        self.packs
            .send((name, pack.data))
            .map_err(|_| io::Error::other("the pack writer stopped"))
    }
}
