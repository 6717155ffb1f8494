"""Workspaces for the resume benchmark: a deterministic tree of N MB (a few large files and
many small ones, about half compressible), its `tar | zstd -3` archive, and the unpack floor
(`zstd -dc | tar -x`) of that archive, alone or many at once."""

import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

MB = 1024 * 1024
WORDS = (b"sandbox release restore agent tool call fn let mut match return self async await "
         b"struct impl { } => 0x1f approve resume checkpoint workspace").split()


def _content(rng, size):
    """About half random bytes, half text made of a few words (compresses ~4x)."""
    out = bytearray()
    while len(out) < size:
        n = min(size - len(out), rng.randint(4096, 65536))
        if rng.random() < 0.5:
            out += rng.randbytes(n)
        else:
            line = b" ".join(rng.choice(WORDS) for _ in range(12)) + b"\n"
            out += (line * (n // len(line) + 1))[:n]
    return bytes(out)


def make_tree(dir_, mb, seed=42):
    """40 % of the bytes in 4 large files, the rest in small files of 1-32 KiB in 16 folders."""
    rng = random.Random(seed)
    total = mb * MB
    dir_.mkdir(parents=True, exist_ok=True)
    large = total * 4 // 10
    for i in range(4):
        (dir_ / f"large-{i}.bin").write_bytes(_content(rng, large // 4))
    left, i = total - large, 0
    while left > 0:
        size = min(left, rng.randint(1024, 32 * 1024))
        sub = dir_ / f"src{i % 16:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i:06d}.txt").write_bytes(_content(rng, size))
        left -= size
        i += 1
    return i + 4


def pack(tree, archive):
    subprocess.run(f"tar -cf - . | zstd -3 -q -o {archive}", shell=True, cwd=tree, check=True)


class Trees:
    """One tree and archive per size, made on first use under `root`."""

    def __init__(self, root):
        self.root = Path(root)
        self.made = {}
        self.lock = threading.Lock()

    def get(self, mb):
        with self.lock:
            if mb not in self.made:
                tree = self.root / f"tree-{mb}mb"
                files = make_tree(tree, mb)
                archive = self.root / f"tree-{mb}mb.tar.zst"
                pack(tree, archive)
                self.made[mb] = (tree, archive, files)
            return self.made[mb]


def fill(tree, sandbox_dir):
    """Copies the tree into a sandbox's folder, owned like the folder (as the sandbox's own
    writes would be)."""
    st = os.stat(sandbox_dir)  # before the copy, whose `-a` gives the folder the tree's owner
    subprocess.run(["cp", "-a", f"{tree}/.", str(sandbox_dir)], check=True)
    subprocess.run(["chown", "-R", f"{st.st_uid}:{st.st_gid}", str(sandbox_dir)], check=True)
    os.chmod(sandbox_dir, st.st_mode & 0o7777)


def unpack_floor(archive, scratch, n=1):
    """Starts `n` unpacks of `archive` at once; the seconds each took, from the common start."""
    outs = [Path(scratch) / f"floor-{i}" for i in range(n)]
    for o in outs:
        shutil.rmtree(o, ignore_errors=True)
        o.mkdir(parents=True)
    os.sync()
    took = [None] * n

    def one(i):
        p = subprocess.Popen(f"zstd -dc -q {archive} | tar -x", shell=True, cwd=outs[i])
        if p.wait() == 0:
            took[i] = time.monotonic() - t0

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        shutil.rmtree(o, ignore_errors=True)
    if None in took:
        raise RuntimeError("the floor's unpack failed")
    return took
