//! Keeps the log file's unwritten pages few.
//!
//! At the default `info` level every request writes a line: over 15 MB a second under load.
//! Left to the kernel, a file's dirty pages are written back about 30 seconds later, in bulk,
//! and meanwhile an `fsync` on the same file system can wait behind them: SQLite's writer
//! waited 228–308 ms on its WAL (a checkpoint, a WAL restart), holding every write behind
//! it. So when the log goes to a regular file, the log thread syncs it at the end of a batch
//! once [`SYNC_EVERY`] bytes were written since the last sync. That is off the request path:
//! while the thread waits, lines queue up, and are dropped and counted only if the queue
//! fills.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};

/// Bytes written to the log file between two syncs.
pub const SYNC_EVERY: usize = 1 << 20;

/// `out`, synced every `every` bytes when it is a regular file.
pub struct Writeback<W> {
    out: W,
    every: usize,
    unsynced: usize,
    /// A handle on `out`'s file, to sync it; `None` when `out` is not a regular file, or a
    /// sync failed once.
    file: Option<File>,
    synced: u64,
}

impl<W: Write + AsFd> Writeback<W> {
    pub fn new(out: W, every: usize) -> Self {
        let file = regular_file(out.as_fd());
        Self {
            out,
            every: every.max(1),
            unsynced: 0,
            file,
            synced: 0,
        }
    }

    /// How many times the file was synced.
    pub fn synced(&self) -> u64 {
        self.synced
    }
}

impl<W: Write> Write for Writeback<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.unsynced += n;
        Ok(n)
    }

    /// Flushes `out`, then syncs the file if `every` bytes or more were written since the
    /// last sync: the log thread flushes once per batch, so a batch is never synced halfway.
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        if self.unsynced < self.every {
            return Ok(());
        }
        self.unsynced = 0;
        if let Some(file) = &self.file {
            match file.sync_data() {
                Ok(()) => self.synced += 1,
                Err(_) => self.file = None,
            }
        }
        Ok(())
    }
}

fn regular_file(fd: BorrowedFd<'_>) -> Option<File> {
    let file = File::from(fd.try_clone_to_owned().ok()?);
    file.metadata()
        .is_ok_and(|m| m.file_type().is_file())
        .then_some(file)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek};

    use super::*;

    #[test]
    fn a_log_file_is_synced_every_so_many_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        let mut out = Writeback::new(file.try_clone().unwrap(), 4096);
        for _ in 0..10 {
            out.write_all(&[b'x'; 1000]).unwrap();
            out.flush().unwrap();
        }
        assert_eq!(
            out.synced(),
            2,
            "at the flushes after 5,000 and 10,000 bytes: 4,096 or more since the last"
        );
        let mut written = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut written).unwrap();
        assert_eq!(written, vec![b'x'; 10_000]);
    }

    #[test]
    fn a_pipe_is_written_through_and_never_synced() {
        let (mut reader, writer) = io::pipe().unwrap();
        let mut out = Writeback::new(writer, 10);
        assert!(out.file.is_none(), "a pipe is not a regular file");
        out.write_all(b"a line that is longer than ten bytes\n")
            .unwrap();
        out.flush().unwrap();
        assert_eq!(out.synced(), 0);
        drop(out);
        let mut line = String::new();
        reader.read_to_string(&mut line).unwrap();
        assert_eq!(line, "a line that is longer than ten bytes\n");
    }
}
