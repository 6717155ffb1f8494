//! A checkpoint's manifest in its canonical form, the bytes its digest is taken over:
//!
//! ```text
//! sagents-manifest 1
//! D <mode> <mtime> <path>
//! F <mode> <mtime> <size> <sha256> <where> <path>
//! L <path> <target>
//! ```
//!
//! One line per entry, `\n`-terminated, in walk order (depth first, names sorted bytewise,
//! a folder before what it holds). `mode` is octal (`& 0o7777`), `mtime` whole seconds,
//! `sha256` the lowercase hex of the file's content. `where` is `-` (the content is the blob
//! named by `sha256`) or `<pack sha256>+<offset>` (bytes `offset..offset+size` of that pack
//! once decompressed). Paths and targets are bytes, every one outside
//! `[A-Za-z0-9._/+,=@:~-]` written `%XX`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

pub const HEADER: &str = "sagents-manifest 1";

pub type Hash = [u8; 32];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The blob named by the file's own hash.
    Own,
    /// Inside a pack, at an offset of its decompressed bytes.
    Pack(Hash, u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir {
        path: OsString,
        mode: u32,
        mtime: u64,
    },
    File {
        path: OsString,
        mode: u32,
        mtime: u64,
        size: u64,
        hash: Hash,
        place: Place,
    },
    Link {
        path: OsString,
        target: OsString,
    },
}

impl Entry {
    pub fn path(&self) -> &OsString {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } | Entry::Link { path, .. } => path,
        }
    }
}

/// The blobs a manifest needs: each own-blob file's hash and each pack's.
pub fn blobs_of(entries: &[Entry]) -> std::collections::HashSet<Hash> {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::File { hash, place, .. } => Some(match place {
                Place::Own => *hash,
                Place::Pack(pack, _) => *pack,
            }),
            _ => None,
        })
        .collect()
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._/+,=@:~-".contains(&b)
}

pub fn escape(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        match plain(b) {
            true => out.push(b as char),
            false => out.push_str(&format!("%{b:02X}")),
        }
    }
}

fn unescape(s: &str) -> Option<OsString> {
    let raw = s.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    Some(OsString::from_vec(out))
}

/// The canonical bytes of `entries`.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut s = String::with_capacity(64 + entries.len() * 128);
    s.push_str(HEADER);
    s.push('\n');
    for e in entries {
        match e {
            Entry::Dir { path, mode, mtime } => {
                s.push_str(&format!("D {:o} {mtime} ", mode & 0o7777));
                escape(path.as_bytes(), &mut s);
            }
            Entry::File {
                path,
                mode,
                mtime,
                size,
                hash,
                place,
            } => {
                s.push_str(&format!(
                    "F {:o} {mtime} {size} {} ",
                    mode & 0o7777,
                    hex::encode(hash)
                ));
                match place {
                    Place::Own => s.push('-'),
                    Place::Pack(pack, offset) => {
                        s.push_str(&format!("{}+{offset}", hex::encode(pack)))
                    }
                }
                s.push(' ');
                escape(path.as_bytes(), &mut s);
            }
            Entry::Link { path, target } => {
                s.push_str("L ");
                escape(path.as_bytes(), &mut s);
                s.push(' ');
                escape(target.as_bytes(), &mut s);
            }
        }
        s.push('\n');
    }
    s.into_bytes()
}

pub fn parse_hash(s: &str) -> Option<Hash> {
    let mut h = [0u8; 32];
    hex::decode_to_slice(s, &mut h).ok()?;
    Some(h)
}

fn parse_line(line: &str) -> Option<Entry> {
    let mut f = line.split(' ');
    let kind = f.next()?;
    let octal = |s: Option<&str>| s.and_then(|s| u32::from_str_radix(s, 8).ok());
    let num = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok());
    let entry = match kind {
        "D" => Entry::Dir {
            mode: octal(f.next())?,
            mtime: num(f.next())?,
            path: unescape(f.next()?)?,
        },
        "F" => {
            let (mode, mtime, size) = (octal(f.next())?, num(f.next())?, num(f.next())?);
            let hash = parse_hash(f.next()?)?;
            let place = match f.next()? {
                "-" => Place::Own,
                p => {
                    let (pack, offset) = p.split_once('+')?;
                    Place::Pack(parse_hash(pack)?, offset.parse().ok()?)
                }
            };
            Entry::File {
                path: unescape(f.next()?)?,
                mode,
                mtime,
                size,
                hash,
                place,
            }
        }
        "L" => Entry::Link {
            path: unescape(f.next()?)?,
            target: unescape(f.next()?)?,
        },
        _ => return None,
    };
    f.next().is_none().then_some(entry)
}

/// The entries of a canonical manifest; `None` if any line is not of the form above.
pub fn decode(bytes: &[u8]) -> Option<Vec<Entry>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let body = text.strip_prefix(HEADER)?.strip_prefix('\n')?;
    if !body.is_empty() && !body.ends_with('\n') {
        return None;
    }
    body.split_terminator('\n').map(parse_line).collect()
}

/// `sha256:` + hex of the canonical bytes.
pub fn digest(canonical: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(canonical)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_of_a_name_round_trips() {
        let weird: Vec<u8> = (1u8..=255).collect();
        let entries = vec![
            Entry::Dir {
                path: OsString::from("a b"),
                mode: 0o755,
                mtime: 7,
            },
            Entry::File {
                path: OsString::from_vec(weird.clone()),
                mode: 0o4644,
                mtime: 1,
                size: 3,
                hash: [9; 32],
                place: Place::Pack([1; 32], 42),
            },
            Entry::File {
                path: OsString::from("a b/%\n"),
                mode: 0o600,
                mtime: 2,
                size: 0,
                hash: [0; 32],
                place: Place::Own,
            },
            Entry::Link {
                path: OsString::from("l"),
                target: OsString::from_vec(weird),
            },
        ];
        let bytes = encode(&entries);
        assert_eq!(decode(&bytes).unwrap(), entries);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        assert!(decode(&bytes[..bytes.len() - 1]).is_none(), "a cut line");
        assert!(decode(b"sagents-manifest 1\nX 1\n").is_none());
        assert!(decode(b"sagents-manifest 1\nD 755 1 a b\n").is_none());
    }
}
