"""The end of a chaos run: details on stderr and in report.json, one summary line on stdout,
and the exit status (1 when an invariant does not hold or approve_to_resume p99 is above
--p99-limit-ms, 2 s by default)."""

import json
import sys
import time

import faultlog

from stats import percentile

def err(msg=""):
    print(msg, file=sys.stderr, flush=True)


def show(title, rows, limit=10):
    if not rows:
        return
    err(f"  {title} ({len(rows)}):")
    for row in rows[:limit]:
        err(f"    {row}")
    if len(rows) > limit:
        err(f"    ... {len(rows) - limit} more in report.json")


def report(ctx, found, timing, path):
    stats = ctx.stats
    c = stats.counts
    windows = unreachable(timing["phases"])
    held = faultlog.delayed_snapshots(path.parent)
    raw = sorted(x * 1000 for x, _ in stats.approve_to_resume_samples())
    samples = sorted(((max(0.0, x - overlap(t.reply_at, t.resume_claim_at,
                                            merged(windows + held.get(t.run_id, [])))), t)
                      for x, t in stats.approve_to_resume_samples()), key=lambda x: x[0])
    a2r = [x * 1000 for x, _ in samples]
    slowest = [(f"{x * 1000:.0f}ms", t.run_id, t.variant, t.flags) for x, t in samples[-8:][::-1]]
    p50, p99 = percentile(a2r, 50), percentile(a2r, 99)
    limit = ctx.a.p99_limit_ms
    figures = {
        "cycles": found["cycles"],
        "lost_interactions": len(found["lost"]),
        "double_answers": len(found["double"]),
        "leaked_sandboxes": len(found["leaked"]),
        "false_released": len(found["false_released"]),
        "stuck_runs": len(found["stuck"]),
        "stale_writes_accepted": len(stats.stale_accepted),
        "5xx_outside_kills": c["5xx_outside_kills"],
        "snapshots_lost_without_provider_word": len(found["snapshots_lost"]),
        "unexplained_failures_after_approval": len(found["unexplained_failures"]),
        "parents_released_before_children": len(found["children_late"]),
    }
    worst, over = ctx.meter.worst() if ctx.meter is not None else (0, [])
    figures["max_writes_per_resuming_run_in_outage"] = worst
    err("")
    err(f"chaos: seed {ctx.seed}; run {timing['run']:.0f}s, settle {timing['settle']:.0f}s "
        f"(records {timing['settle_wait']:.0f}s, leaks {timing['leak_wait']:.0f}s), total {timing['total']:.0f}s")
    err(f"  cycles by outcome: {dict(found['cycle_outcomes'])}; of {c['cycles_started']} started "
        f"({c['cycles_abandoned']} abandoned by their human, {c['cycles_errored']} errored, "
        f"{c['cycles_timed_out']} timed out)")
    err(f"  approve_to_resume: {len(a2r)} samples, p50 {p50:.0f} ms, p90 {percentile(a2r, 90):.0f} ms, "
        f"p99 {p99:.0f} ms, max {max(a2r or [0]):.0f} ms, {sum(1 for x in a2r if x > 2000)} above 2000 ms "
        f"(without the time the provider was down or behind a lying proxy, or held the run's snapshot on purpose; counting it: p99 "
        f"{percentile(raw, 99):.0f} ms, max {max(raw or [0]):.0f} ms)")
    err(f"  kills: {c['replica_kills']} replicas, {c['provider_kills']} provider; "
        f"{c['provider_forgot_sandbox']} sandboxes forgotten by the provider, "
        f"{c['outside_sandboxes']} created outside any record")
    err(f"  provider inventory read from: {found['source']}; {found['items']} sandboxes, "
        f"by state {dict(found['live_at_provider'])}")
    err(f"  stale writes tried: {c['stale_writes_tried']}, accepted: {len(stats.stale_accepted)}")
    err(f"  5xx: {c['5xx_during_kills']} during kills, {c['5xx_outside_kills']} outside; connection errors: "
        f"{c['conn_errors_during_kills']} during kills, {c['conn_errors_stale_keepalive']} on idle keep-alives, "
        f"{c['conn_errors_unexplained']} unexplained")
    err("  service-side effects (execution-resource history, state entered / error code):")
    for e in found["resource_events"]:
        err(f"    {e['type']:<32} {e['code'] or '-':<36} {e['n']}")
    calls = faultlog.count(path.parent)
    err("  failed provider calls the replicas logged (call / kind):")
    for (call, kind), n in sorted(calls.items(), key=lambda x: -x[1]):
        err(f"    {call:<10} {kind:<44} {n}")
    err("  run outcomes (state / error code):")
    for e in found["run_outcomes"]:
        err(f"    {e['state']:<12} {e['code'] or '-':<36} {e['n']}")
    err(f"  approved (2xx) but failed on resume, by error code: {dict(found['approved_then_failed'])}")
    odd(ctx, found, c)
    err("  counters: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items())))
    show("slowest approve_to_resume (ms, run, variant, flags)", slowest)
    show("lost interactions", found["lost"])
    show("double answers", found["double"])
    show("leaked sandboxes (sandbox, owner, state, why, record state)", found["leaked"])
    show("false released (run, sandbox, record state, provider state)", found["false_released"])
    show("stuck runs (run, state, record state, record error)", found["stuck"])
    show("stale writes accepted", stats.stale_accepted)
    show("5xx outside kills", stats.five_xx)
    show("records not settled", found["unsettled_records"])
    show("snapshots lost without the provider's word (run, sandbox, cause, message, proxy, provider now)",
         found["snapshots_lost"])
    show("failures after approval without the provider's word (run, code, why)", found["unexplained_failures"])
    show("parents released before their children (parent, child, why)", found["children_late"])
    show("outages whose busiest resuming run wrote above the bound (run, writes, bound, seconds)", over)
    show("sandboxes the provider forgot (sandbox, run, run state, error code)", found["forgotten"])
    if ctx.outside:
        show("sandboxes created outside any record (sandbox, owner)", ctx.outside)

    summary = "chaos: " + " ".join(f"{k}={v}" for k, v in figures.items()) + f" approve_to_resume_p99={p99:.0f}ms"
    with open(path, "w") as f:
        json.dump({"summary": summary, "figures": figures, "approve_to_resume_ms": {"p50": p50, "p99": p99,
                   "samples": len(a2r), "p99_counting_unreachable": percentile(raw, 99)}, "timing": timing, "counters": dict(c),
                   "failed_provider_calls": {f"{k[0]} / {k[1]}": v for k, v in calls.items()},
                   "found": {k: v for k, v in found.items()}, "forgotten": ctx.forgotten,
                   "outside": ctx.outside, "stale_accepted": stats.stale_accepted,
                   "behaviours": ctx.behaviours, "skipped": ctx.skipped,
                   "outages": ctx.meter.outages if ctx.meter is not None else [],
                   "proxy": {"counts": dict(ctx.proxy.counts), "lied_about": ctx.proxy.lied_about}
                   if ctx.proxy is not None else None,
                   "five_xx": [(m, p, r, s, b.decode("utf-8", "replace")) for m, p, r, s, b in stats.five_xx]},
                  f, indent=1, default=str)
    print(summary, flush=True)
    bad = [k for k, v in figures.items() if k not in ("cycles", "max_writes_per_resuming_run_in_outage") and v]
    if over:
        bad.append("a resuming run wrote its record more often than the outage bound allows")
    if p99 > limit:
        bad.append(f"approve_to_resume_p99 above {limit} ms")
    if found["cycles"] < ctx.a.cycles:
        bad.append(f"only {found['cycles']} of {ctx.a.cycles} cycles ended")
    if not a2r:
        bad.append("no approve_to_resume sample")
    if bad:
        err("chaos: FAILED: " + "; ".join(bad))
        return 1
    return 0


UNREACHABLE = ("provider_down", "proxy_html404", "proxy_html502")


def unreachable(phase_log):
    """The windows in which the provider was down or behind a lying proxy, on purpose."""
    out = []
    for i, (t0, name) in enumerate(phase_log):
        if name in UNREACHABLE:
            out.append((t0, phase_log[i + 1][0] if i + 1 < len(phase_log) else time.monotonic()))
    return out


def merged(windows):
    """The windows as disjoint intervals, so no time is taken off twice."""
    out = []
    for w0, w1 in sorted(windows):
        if out and w0 <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], w1))
        else:
            out.append((w0, w1))
    return out


def overlap(a, b, windows):
    return sum(max(0.0, min(b, w1) - max(a, w0)) for w0, w1 in windows)


def odd(ctx, found, c):
    """What the odd providers did and what came of it."""
    on = ", ".join(k for k, v in ctx.behaviours.items() if v) or "none"
    err(f"  odd providers on: {on}")
    for name, why in ctx.skipped.items():
        err(f"    {name} {'forced on' if ctx.behaviours.get(name) else 'off'}: the provider refuses its fault point ({why})")
    if ctx.proxy is not None:
        lies = sum(v for k, v in ctx.proxy.counts.items() if k.startswith("html_"))
        err(f"  proxy: {ctx.proxy.counts['passed']} calls passed, {lies} answered with an HTML page, "
            f"{ctx.proxy.counts['upstream_cut']} cut with the provider; {len(ctx.proxy.lied_about)} sandboxes lied about")
        for k, v in sorted(ctx.proxy.counts.items(), key=lambda x: -x[1]):
            if k.startswith("html_"):
                err(f"    {k:<56} {v}")
    if ctx.meter is not None:
        for o in ctx.meter.outages:
            top = o.get("top") or []
            err(f"  outage {o['seconds']} s: {o.get('resuming_runs', 0)} resuming runs, bound {o.get('bound')} writes, "
                f"most writes {top[0][0] if top else 0} ({top[0][1] if top else '-'})")
    err(f"  child runs: {c['child_runs']} created, refused: "
        f"{ {k: v for k, v in c.items() if k.startswith('child_runs_refused')} }")
    err(f"  snapshots lost: {found['snapshots_lost_explained']} on the provider's word, "
        f"{len(found['snapshots_lost'])} without")
