"""Folds `perf script` output into flamegraph stacks: `frame;frame;… count` per line.

usage: perf script -i perf.data | python3 fold.py > out.folded
Generic parameters and closures' long paths are shortened so the file stays readable.
"""
import collections
import re
import sys


def short(sym):
    sym = re.sub(r" \(.*\)$", "", sym)
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
    prev = None
    while prev != sym:  # drop generic parameters, innermost first
        prev = sym
        sym = re.sub(r"<[^<>]*>", "", sym)
    return sym.replace(";", ":").strip() or "?"


stacks = collections.Counter()
frames, comm = [], None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        if comm is not None:
            stacks[";".join([comm] + [short(f) for f in reversed(frames)])] += 1
        frames, comm = [], None
    elif not line.startswith((" ", "\t")):
        comm = line.split()[0]
    else:
        parts = line.strip().split(" ", 1)
        if len(parts) == 2:
            frames.append(parts[1])
if comm is not None:
    stacks[";".join([comm] + [short(f) for f in reversed(frames)])] += 1
for stack, n in sorted(stacks.items()):
    print(stack, n)
