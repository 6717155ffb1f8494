"""approve → resume as a user sees it: a run whose sandbox holds an N MB workspace suspends for
an approval, its sandbox is released (`snapshot_and_terminate`), a human approves, and the
clock runs until the runtime's long-polled claim offers the run back with its restored sandbox
and a fresh grant. Side by side with the `zstd -dc | tar -x` floor of the same files and,
with `--base`, the same cases against another build's binaries. See scripts/bench-resume."""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resume_env import Env  # noqa: E402
from resume_tree import Trees, fill, unpack_floor  # noqa: E402

STAGES = ("reply_to_claim_ms", "claim_to_call_ms", "provider_ms", "answer_to_saved_ms",
          "saved_to_offered_ms", "total_ms")


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def cases(a):
    out = [(f"seq-{mb}", 1, mb, a.rounds) for mb in (1, 10, 100)]
    if a.big:
        out.append(("seq-1024", 1, 1024, a.rounds))
    out += [("burst-32", 32, 10, a.burst_rounds), ("burst-200", 200, 1, a.burst_rounds)]
    if a.cases:
        wanted = a.cases.split(",")
        out = [c for c in out if c[0] in wanted]
    return out


def one_round(env, trees, mb, n, pollers, tag, verify):
    """n runs suspended and released, approved at once; each run's approve → claim seconds."""
    tree, _, files = trees.get(mb)
    with ThreadPoolExecutor(16) as ex:
        made = list(ex.map(lambda i: env.new_run(f"{tag}-{i}"), range(n)))
    rids = {rid for _, rid in made}
    claims = {}
    while len(claims) < n:
        for c in env.claim("bench-setup", max_=100, wait=20):
            claims[c["run"]["id"]] = c
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda c: fill(tree, env.sandbox_dir(c["sandbox"]["ref"]["sandbox_id"])),
                    claims.values()))
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda c: env.suspend(c["run"]["id"], c["lease"]["fencing_token"], 1),
                    claims.values()))
    env.until_released(rids)
    with ThreadPoolExecutor(16) as ex:
        iids = dict(zip([sid for sid, _ in made], ex.map(env.pending_interaction,
                                                          [sid for sid, _ in made])))
    os.sync()

    offered, resumed, done = {}, {}, threading.Event()
    lock = threading.Lock()

    def poll(i):
        while not done.is_set():
            got = env.claim(f"bench-runtime-{i}", max_=min(n, 100), wait=2)
            t = time.monotonic()
            with lock:
                for c in got:
                    offered[c["run"]["id"]] = t
                    resumed[c["run"]["id"]] = c
                if len(offered) >= n:
                    done.set()

    poll_threads = [threading.Thread(target=poll, args=(i,)) for i in range(pollers)]
    for t in poll_threads:
        t.start()
    deadline = time.monotonic() + 10
    while env.long_polls_waiting() < pollers and time.monotonic() < deadline:
        time.sleep(0.01)

    approved, gate = {}, threading.Barrier(n)

    def approve(sid):
        env.api.call("GET", "/readyz", "-")  # this thread's connection, open before the gate
        gate.wait()
        approved[sid] = time.monotonic()
        env.approve(sid, iids[sid])

    approvers = [threading.Thread(target=approve, args=(sid,)) for sid, _ in made]
    for t in approvers:
        t.start()
    for t in approvers:
        t.join()
    if not done.wait(600):
        raise RuntimeError(f"only {len(offered)} of {n} runs were offered back within 600 s")
    for t in poll_threads:
        t.join()
    by_run = {rid: sid for sid, rid in made}
    took = [offered[rid] - approved[by_run[rid]] for rid in rids]
    for c in resumed.values():
        if c["kind"] != "resume" or not c["sandbox"]["grant"]:
            raise RuntimeError(f"not a resume with a grant: {json.dumps(c)[:300]}")
    if verify:
        c = next(iter(resumed.values()))
        out = env.exec(c, ["sh", "-c", "find . -type f | wc -l"])
        if int(out["stdout"].strip()) < files:
            raise RuntimeError(f"the restored workspace holds {out['stdout'].strip()} files, not {files}")
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(env.finish, resumed.values()))
    env.until_released(rids, limit=120, strict=False)
    return took, rids


def stage_medians(env, rids):
    rows = [line for line in env.log_lines()
            if line.get("message") == "resume stages" and line.get("run_id") in rids]
    if not rows:
        return None
    return {s: statistics.median(float(r[s]) for r in rows if s in r) for s in STAGES
            if any(s in r for r in rows)}


def run_case(a, build, bin_dir, case, trees, scratch):
    name, n, mb, rounds = case
    work = scratch / f"{name}-{build}"
    env = Env(bin_dir, work, a.workers).start()
    took, floor, rids = [], [], set()
    try:
        for r in range(rounds):
            t, ids = one_round(env, trees, mb, n, 1 if n == 1 else a.pollers, f"{name}-{r}", r == 0)
            took += t
            rids |= ids
            floor += unpack_floor(trees.get(mb)[1], scratch, n)
        stages = stage_medians(env, rids)
    finally:
        env.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    ms = [x * 1000 for x in took]
    fl = [x * 1000 for x in floor]
    return {"case": name, "build": build, "runs": len(ms), "p50": pct(ms, 0.5), "p90": pct(ms, 0.9),
            "max": max(ms), "floor_p50": pct(fl, 0.5), "floor_max": max(fl), "stages": stages}


def table(results):
    out = ["| case | build | resumes | p50 ms | p90 ms | max ms | floor p50 / max ms | p50 ÷ floor | p50 ÷ base | max ÷ base |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    base = {r["case"]: r for r in results if r["build"] == "base"}
    for r in results:
        b = base.get(r["case"])
        vs = f"{r['p50'] / b['p50']:.2f}" if b and r["build"] != "base" else ""
        vmax = f"{r['max'] / b['max']:.2f}" if b and r["build"] != "base" else ""
        out.append(f"| {r['case']} | {r['build']} | {r['runs']} | {r['p50']:.1f} | {r['p90']:.1f} | "
                   f"{r['max']:.1f} | {r['floor_p50']:.1f} / {r['floor_max']:.1f} | "
                   f"{r['p50'] / r['floor_p50']:.2f} | {vs} | {vmax} |")
    out += ["", "Stage medians (ms, from the service's `resume stages` log lines):", "",
            "| case | build | " + " | ".join(s[:-3].replace("_", " ") for s in STAGES) + " |",
            "|---|---|" + "---|" * len(STAGES)]
    for r in results:
        st = r["stages"]
        cells = [f"{st[s]:.1f}" if st and s in st else "n/a" for s in STAGES]
        out.append(f"| {r['case']} | {r['build']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin-dir", required=True, type=Path)
    ap.add_argument("--base", type=Path, help="another build's binary folder, measured alike")
    ap.add_argument("--big", action="store_true", help="also 1 GB, one run at a time")
    ap.add_argument("--rounds", type=int, default=10, help="rounds of each sequential case")
    ap.add_argument("--burst-rounds", type=int, default=1, help="rounds of each burst case")
    ap.add_argument("--pollers", type=int, default=4, help="runtime long-polls during a burst")
    ap.add_argument("--workers", type=int, help="the service's --workers (its default if unset)")
    ap.add_argument("--cases", help="comma-separated: seq-1,seq-10,seq-100,seq-1024,burst-32,burst-200")
    ap.add_argument("--work-dir", type=Path, help="where trees, databases and sandboxes go")
    ap.add_argument("--keep", action="store_true", help="keep each case's folder and logs")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-resume-", dir=a.work_dir))
    os.chmod(scratch, 0o711)
    trees = Trees(scratch / "trees")
    builds = [("this", a.bin_dir)] + ([("base", a.base)] if a.base else [])
    results = []
    try:
        for case in cases(a):
            for build, bin_dir in builds:
                print(f"bench-resume: {case[0]} on {build} ({bin_dir})", file=sys.stderr, flush=True)
                results.append(run_case(a, build, bin_dir, case, trees, scratch))
    finally:
        if not a.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
