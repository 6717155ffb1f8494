#!/usr/bin/env bash
# The share of a reference-provider release spent outside its archive step (tar + zstd,
# `sagents_local_provider::archive::pack`): runs the lifecycle bench's `local` phase with a
# uprobe on entry to and return from `pack`, and sets the archive times against the bench's
# own release figures. Needs root, perf and tracefs.
#
#   cargo bench --bench lifecycle --no-run
#   benches/lifecycle/archive_share.sh target/release/deps/lifecycle-<hash> [out dir]
#
# Environment as for the bench (LBENCH_BACKENDS, LBENCH_LOCAL_N, ...); LBENCH_PHASES is
# set to `local`.
set -euo pipefail
bin=$(realpath "$1")
out=${2:-$(mktemp -d)}
mkdir -p "$out"
tracefs=/sys/kernel/tracing
[ -e "$tracefs/uprobe_events" ] || mount -t tracefs nodev "$tracefs"

sym=$(nm "$bin" | awk '!found && / T _ZN22sagents_local_provider7archive4pack17h/ {print $1; found = 1}')
[ -n "$sym" ] || { echo "no archive::pack symbol in $bin" >&2; exit 1; }
# The uprobe takes a file offset: the symbol's address less its segment's (vaddr - offset).
addr=$((16#$sym))
offset=
while read -r kind off va _ _ memsz _; do
    if [ "$kind" = LOAD ] && [ -z "$offset" ] && ((addr >= va && addr < va + memsz)); then
        offset=$(printf '0x%x' $((addr - va + off)))
    fi
done < <(readelf -lW "$bin")
[ -n "$offset" ] || { echo "no segment holds archive::pack" >&2; exit 1; }
group=lbench_pack_$$
echo "p:$group/enter $bin:$offset" >> "$tracefs/uprobe_events"
echo "r:$group/leave $bin:$offset" >> "$tracefs/uprobe_events"
cleanup() {
    echo "-:$group/enter" >> "$tracefs/uprobe_events" || true
    echo "-:$group/leave" >> "$tracefs/uprobe_events" || true
}
trap cleanup EXIT

LBENCH_PHASES=local perf record -q -e "$group:enter" -e "$group:leave" -o "$out/pack.data" \
    -- "$bin" --bench > "$out/bench.md" 2> "$out/bench.log"
perf script -i "$out/pack.data" -F tid,time,event > "$out/pack.txt" 2>/dev/null
cat "$out/bench.md"
echo
python3 - "$out/pack.txt" "$out/bench.md" "${LBENCH_REPS:-3}" "${LBENCH_LOCAL_N:-200}" \
    "${LBENCH_LOCAL_LATENCY:-60}" <<'PY'
import re, sys
trace, report, reps, n, lat = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
open_at, calls = {}, []
for line in open(trace):
    m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+):", line)
    if not m:
        continue
    tid, t, ev = int(m[1]), float(m[2]), m[3]
    if ev.endswith("enter"):
        open_at[tid] = t
    elif tid in open_at:
        calls.append((open_at.pop(tid), t))
calls.sort()
text = open(report).read()
rates = {}
for name, line in re.findall(r"^- (\w+): (.*)$", text, re.M):
    rates[name] = line
per_backend = reps * n + lat
names = list(rates) or ["?"]
print(f"{len(calls)} archive calls timed ({per_backend} expected per backend)")
for i, name in enumerate(names):
    mine = calls[i * per_backend:(i + 1) * per_backend]
    if len(mine) < per_backend:
        print(f"{name}: only {len(mine)} archive calls")
        continue
    line = rates.get(name, "")
    tput = [float(x.replace(",", "")) for x in
            re.search(r"local releases \[([^\]]*)\]", line)[1].split(", ")] if line else []
    mean_latency = float(re.search(r"mean ([\d.]+) ms", line)[1]) if line else float("nan")
    for r in range(reps):
        batch = mine[r * n:(r + 1) * n]
        busy = sum(b - a for a, b in batch)
        wall = n / tput[r] if r < len(tput) else float("nan")
        print(f"{name} throughput rep {r + 1}: {tput[r] if r < len(tput) else '?'} releases/s, "
              f"archive mean {busy / n * 1e3:.2f} ms, archive time summed / wall time "
              f"{busy / wall:.2f} (archives running at once, on average)")
    last = mine[reps * n:]
    pack = sum(b - a for a, b in last) / len(last) * 1e3
    print(f"{name} one at a time ({lat} runs): suspend commit -> released mean "
          f"{mean_latency:.2f} ms, archive mean {pack:.2f} ms: outside the archive "
          f"{mean_latency - pack:.2f} ms = {(1 - pack / mean_latency) * 100:.0f} %")
PY
