"""After the faults stop: wait (bounded) for the system to settle, then check the invariants
against the database (psql) and the provider (its inventory, or its state files)."""

import http.client
import json
import time
from collections import Counter

from promises import Promises

TERMINAL = ("completed", "failed", "cancelled")
RUNNING_AT_PROVIDER = ("ready", "suspended", "provisioning")


def q_runs(tenant):
    return ("SELECT coalesce(json_agg(json_build_object('id', r.id, 'state', r.state, 'error', r.error, "
            "'session_id', r.session_id, 'created_at', r.created_at)), '[]') FROM runs r JOIN sessions s ON s.id = r.session_id "
            f"WHERE s.tenant_id = '{tenant}'")


Q_RECORDS = ("SELECT coalesce(json_agg(json_build_object('run_id', run_id, 'state', state, "
             "'compute_released', compute_released, 'sandbox_ref', sandbox_ref, 'disposition', disposition, "
             "'release_purpose', release_purpose, 'error', error, 'retry_count', retry_count, "
             "'due_at', due_at, 'checkpoint_lost', checkpoint_lost, 'generation', generation)), '[]') "
             "FROM execution_resources")
Q_INTERACTIONS = ("SELECT coalesce(json_agg(json_build_object('id', id, 'run_id', run_id, 'status', status, "
                  "'decision', decision)), '[]') FROM interactions")
Q_SUSPENSIONS = ("SELECT coalesce(json_agg(json_build_object('run_id', run_id, 'status', status, "
                 "'interaction_id', interaction_id)), '[]') FROM suspensions")
Q_EVENTS = ("SELECT coalesce(json_agg(x), '[]') FROM (SELECT type, data::jsonb->>'interaction_id' AS iid, "
            "data::jsonb->>'run_id' AS rid, count(*) AS n FROM session_events WHERE type IN "
            "('interaction.resolved', 'run.resuming', 'run.running', 'run.suspended') GROUP BY 1, 2, 3) x")
Q_RESOURCE_EVENTS = ("SELECT coalesce(json_agg(x), '[]') FROM (SELECT type, data::jsonb->>'error_code' AS code, "
                     "count(*) AS n FROM execution_resource_events GROUP BY 1, 2 ORDER BY 3 DESC) x")
Q_OUTCOMES = ("SELECT coalesce(json_agg(x), '[]') FROM (SELECT state, coalesce(error::jsonb->>'code', '') AS code, "
              "count(*) AS n FROM runs GROUP BY 1, 2 ORDER BY 3 DESC) x")


def unsettled(pg, tenant):
    runs = pg.psql_json(q_runs(tenant))
    recs = pg.psql_json(Q_RECORDS)
    open_runs = [r for r in runs if r["state"] not in TERMINAL]
    due = [r for r in recs if r["due_at"] is not None or r["state"] not in ("released", "needs_attention")]
    return open_runs, due


def provider_get(p, path):
    conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
    try:
        conn.request("GET", path, headers={"authorization": f"Bearer {p.token}"})
        res = conn.getresponse()
        body = res.read()
        return res.status, (json.loads(body) if body else None)
    except ValueError:
        return res.status, None
    finally:
        conn.close()


def inspect_item(p, sid):
    status, info = provider_get(p, f"/v3/sandboxes/{sid}")
    if status == 200:
        return {"ref": info["ref"], "state": info["state"], "generation": info.get("generation"),
                "labels": {"owner_run_id": info["ref"].get("owner_run_id"),
                           "tenant_id": info["ref"].get("tenant_id")}}
    return {"ref": {"sandbox_id": sid}, "state": f"inspect {status}", "labels": {}}


def inventory(p, previous=None):
    """Every sandbox the provider holds: `GET /v3/sandboxes` pages, else its state files, each
    inspected through the API (so a sandbox whose processes died reads `lost`). With the
    previous answer of the state-file path, only sandboxes not terminated then are read again
    (terminated is final)."""
    items, cursor = [], ""
    status, page = provider_get(p, f"/v3/sandboxes?cursor={cursor}&limit=500")
    if status == 200 and isinstance(page, dict) and "items" in page:
        while True:
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return items, "inventory"
            status, page = provider_get(p, f"/v3/sandboxes?cursor={cursor}&limit=500")
            if status != 200:
                raise RuntimeError(f"provider inventory page failed: {status} {page}")
    known = {i["ref"]["sandbox_id"]: i for i in previous or [] if i["state"] == "terminated"}
    for f in p.state_files():
        sid = f.stem
        items.append(known.get(sid) or inspect_item(p, sid))
    return items, "state files + inspect"


def settle(ctx, bound, leak_grace):
    """Waits until every run is terminal and no record is due, then a little more for live
    sandboxes nobody owns to go (a reconciler); both bounded."""
    t0 = time.monotonic()
    end = t0 + bound
    swept = set()
    while True:
        open_runs, due = unsettled(ctx.pg, ctx.tenant)
        if not open_runs and not due:
            break
        if time.monotonic() > end or ctx.stop.hard.is_set():
            break
        ctx.sweep_pending(swept)
        time.sleep(1.0)
    settled_at = time.monotonic()
    leak_end = settled_at + leak_grace
    items = None
    while not ctx.stop.hard.is_set():
        items, _ = inventory(ctx.provider, items)
        if not any(i["state"] != "terminated" for i in items) or time.monotonic() >= leak_end:
            break
        time.sleep(1.0)
    return settled_at - t0, time.monotonic() - settled_at, items


def check(ctx, previous=None):
    pg, stats = ctx.pg, ctx.stats
    runs = {r["id"]: r for r in pg.psql_json(q_runs(ctx.tenant))}
    recs = {r["run_id"]: r for r in pg.psql_json(Q_RECORDS)}
    for r in recs.values():
        r["ref"] = json.loads(r["sandbox_ref"]) if r["sandbox_ref"] else {}
    inter = pg.psql_json(Q_INTERACTIONS)
    inter_by_id = {i["id"]: i for i in inter}
    inter_by_run = {}
    for i in inter:
        inter_by_run.setdefault(i["run_id"], []).append(i)
    susp_by_run = Counter(s["run_id"] for s in pg.psql_json(Q_SUSPENSIONS))
    ev = Counter()
    for e in pg.psql_json(Q_EVENTS):
        ev[(e["type"], e["iid"] or e["rid"])] += e["n"]
    items, source = inventory(ctx.provider, previous)
    found = {"source": source, "lost": [], "double": [], "leaked": [], "false_released": [], "stuck": []}

    for t in list(stats.tracks.values()):
        rid = t.run_id
        run = runs.get(rid)
        if run is None:
            found["lost"].append((rid, "run created by a 2xx is not in the database"))
            continue
        if t.suspend_ok and not inter_by_run.get(rid):
            found["lost"].append((rid, "suspended with an interaction (2xx) but no interaction exists"))
        if t.reply_at is None and not t.reply_unacked:
            continue
        i = inter_by_id.get(t.interaction_id)
        if i is None or i["status"] != "resolved" or i["decision"] != t.reply_decision:
            found["lost"].append((rid, f"answered {t.reply_decision!r} but the interaction is {i}"))
        elif ev[("run.resuming", t.interaction_id)] < 1:
            found["lost"].append((rid, "answered, but the run never went resuming"))
        elif ev[("run.running", rid)] < 1 and run["state"] != "failed":
            found["lost"].append((rid, f"answered, never confirmed running, ended {run['state']}"))
    for i in inter:
        run = runs.get(i["run_id"])
        if i["status"] == "pending" and run is not None and run["state"] in TERMINAL:
            found["lost"].append((i["run_id"], f"interaction {i['id']} still pending, run {run['state']}"))

    for (kind, key), n in ev.items():
        if kind in ("interaction.resolved", "run.resuming") and n > 1:
            found["double"].append((key, f"{kind} logged {n} times"))
        if kind == "run.running" and n > susp_by_run.get(key, 0):
            found["double"].append((key, f"confirmed running {n} times for {susp_by_run.get(key, 0)} suspensions"))
    for what, rid, detail in stats.double_answers:
        found["double"].append((rid, f"{what}: {detail}"))

    by_sandbox = {r["ref"].get("sandbox_id"): r for r in recs.values() if r["ref"]}
    for item in items:
        sid = item["ref"].get("sandbox_id")
        state = item["state"]
        owner = (item.get("labels") or {}).get("owner_run_id") or item["ref"].get("owner_run_id")
        rec = by_sandbox.get(sid)
        run = runs.get(owner)
        if state == "terminated":
            continue
        if rec is None or rec["run_id"] != owner or run is None or run["state"] in TERMINAL:
            if rec is None and owner in recs:
                why = f"no record holds it; its owner is {run['state']} and holds {recs[owner]['ref'].get('sandbox_id')}"
            elif rec is None:
                why = "no record holds it; its owner is no run of ours"
            else:
                why = f"its run is {run['state'] if run else 'unknown'}"
            found["leaked"].append((sid, owner, state, why, rec and rec["state"]))
    live = {i["ref"].get("sandbox_id"): i["state"] for i in items}
    for rid, r in recs.items():
        if (r["state"] == "released" or r["compute_released"]) and live.get(r["ref"].get("sandbox_id")) in RUNNING_AT_PROVIDER:
            found["false_released"].append((rid, r["ref"].get("sandbox_id"), r["state"], live[r["ref"]["sandbox_id"]]))
    for rid, run in runs.items():
        if run["state"] not in TERMINAL:
            rec = recs.get(rid)
            found["stuck"].append((rid, run["state"], rec and rec["state"], rec and rec["error"]))

    def code(run):
        try:
            return (json.loads(run["error"]) or {}).get("code") if run and run["error"] else None
        except ValueError:
            return run["error"]

    found["approved_then_failed"] = Counter(
        code(runs[t.run_id]) for t in stats.tracks.values()
        if (t.reply_at is not None or t.reply_unacked) and t.reply_decision == "approve"
        and runs.get(t.run_id, {}).get("state") == "failed")
    prom = Promises(ctx, runs, recs, lambda sid: provider_get(ctx.provider, f"/v3/sandboxes/{sid}"))
    explained, found["snapshots_lost"] = prom.lost_snapshots(code)
    found["snapshots_lost_explained"] = len(explained)
    approved = [t for t in stats.tracks.values()
                if (t.reply_at is not None or t.reply_unacked) and t.reply_decision == "approve"]
    found["unexplained_failures"] = prom.failures_after_approval(approved, code, explained)
    found["children_late"] = prom.children_held_parents(list(stats.tracks.values()))
    found["forgotten"] = [(sid, rid, runs.get(rid, {}).get("state"), code(runs.get(rid))) for sid, rid in ctx.forgotten]
    found["unsettled_records"] = [(rid, r["state"], r["error"]) for rid, r in recs.items()
                                  if rid in runs and (r["state"] not in ("released", "needs_attention")
                                                      or r["due_at"] is not None)]
    found["resource_events"] = pg.psql_json(Q_RESOURCE_EVENTS)
    found["run_outcomes"] = pg.psql_json(Q_OUTCOMES)
    found["items"] = len(items)
    ours = [runs.get(t.run_id) for t in stats.tracks.values() if t.variant != "child"]
    found["cycles"] = sum(1 for r in ours if r is not None and r["state"] in TERMINAL)
    found["cycle_outcomes"] = Counter(r["state"] for r in ours if r is not None)
    found["live_at_provider"] = Counter(i["state"] for i in items)
    return found
