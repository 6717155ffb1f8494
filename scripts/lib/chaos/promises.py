"""The promises odd providers test: a snapshot is lost only on a provider's word, a run that
a human approved fails only on one, and a sub-agent's sandbox holds its parent's release."""

import json
import re

TERMINAL_CODES = ("sandbox.lost", "sandbox.kill_failed", "checkpoint.missing", "checkpoint.corrupt")
GONE_CODES = ("release.confirmed_by_inspect", "sandbox.not_found")
CHECKPOINT_GONE = "checkpoint.not_found"
SNAPSHOT_LOST = "sandbox.snapshot_lost"
ID = re.compile(r"^[0-9A-Za-z_]+$")


def q_events(run_ids):
    ids = ",".join(f"'{r}'" for r in sorted(run_ids) if r and ID.match(r))
    return ("SELECT coalesce(json_agg(json_build_object('run_id', run_id, 'type', type, 'code', "
            "data::jsonb->>'error_code', 'at', created_at) ORDER BY run_id, sequence), '[]') "
            f"FROM execution_resource_events WHERE run_id IN ({ids or 'NULL'})")


def error_of(value):
    try:
        e = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {"code": value}
    return e if isinstance(e, dict) else None


def provider_word(err):
    """A v3 terminal error: not retryable, with a terminal code or the terminal category."""
    return (isinstance(err, dict) and err.get("retryable") is False
            and (err.get("code") in TERMINAL_CODES or err.get("category") == "sandbox_failure"))


class Promises:
    def __init__(self, ctx, runs, recs, inspect):
        self.ctx = ctx
        self.runs = runs
        self.recs = recs
        self.inspect = inspect
        self.forgotten = {sid for sid, _ in ctx.forgotten}
        self.lied_about = ctx.proxy.lied_about if ctx.proxy is not None else {}
        self.seen = {}
        self.events = {}

    def load_events(self, run_ids):
        for e in self.ctx.pg.psql_json(q_events(run_ids)):
            self.events.setdefault(e["run_id"], []).append(e)

    def at_provider(self, sid):
        """The provider's own answer for a sandbox now (not through the proxy): status, state or code."""
        if sid not in self.seen:
            try:
                status, body = self.inspect(sid)
            except OSError as e:
                status, body = None, {"code": repr(e)}
            body = body if isinstance(body, dict) else {}
            self.seen[sid] = (status, body.get("state") or body.get("code"))
        return self.seen[sid]

    def gone(self, sid):
        return bool(sid) and (sid in self.forgotten or self.at_provider(sid) == (404, "sandbox.not_found"))

    def sandbox_of(self, rid):
        rec = self.recs.get(rid)
        return (rec or {}).get("ref", {}).get("sandbox_id")

    def since_bind(self, rid):
        """The record's events since its sandbox was last bound: a bind clears a lost snapshot."""
        events = self.events.get(rid, [])
        bound = [i for i, e in enumerate(events) if e["type"] == "lifecycle.active"]
        return events[bound[-1] + 1:] if bound else events

    def loss_cause(self, rid):
        """What lost the snapshot: the record's error if it is the provider's terminal word, else
        that word in the record's history since its last bind (a forced terminate carries the
        word that forced it; a later reconcile clears the error), else the last error seen."""
        rec = self.recs.get(rid)
        err = error_of(rec["error"]) if rec and rec["checkpoint_lost"] else None
        if provider_word(err):
            return err
        codes = [e["code"] for e in self.since_bind(rid) if e["code"]]
        words = [c for c in codes if c in TERMINAL_CODES]
        if words:
            return {"code": words[-1], "category": "sandbox_failure", "retryable": False}
        if err:
            return err
        return {"code": codes[-1]} if codes else None

    def lost_snapshots(self, run_code):
        """Every lost snapshot, judged: `(explained run ids, violations)`."""
        lost = {rid for rid, r in self.recs.items() if r["checkpoint_lost"]}
        lost |= {rid for rid, run in self.runs.items() if run_code(run) == SNAPSHOT_LOST}
        self.load_events(lost)
        explained, bad = set(), []
        for rid in sorted(lost):
            cause = self.loss_cause(rid)
            sid = self.sandbox_of(rid)
            code = (cause or {}).get("code")
            if provider_word(cause) or (code in GONE_CODES and self.gone(sid)):
                explained.add(rid)
                continue
            bad.append((rid, sid, code, ((cause or {}).get("message") or "")[:160],
                        f"proxy lied about it {len(self.lied_about.get(sid, []))} times",
                        f"provider now: {self.at_provider(sid) if sid else None}"))
        return explained, bad

    def failures_after_approval(self, tracks, run_code, explained_losses):
        """Approved runs that failed; a failure is explained by a lost snapshot that was, or by
        a provider's terminal word (or a sandbox really gone) in its record's history."""
        failed = [t for t in tracks if self.runs.get(t.run_id, {}).get("state") == "failed"]
        self.load_events({t.run_id for t in failed} - set(self.events))
        bad = []
        for t in failed:
            rid = t.run_id
            code = run_code(self.runs[rid])
            if code == SNAPSHOT_LOST:
                if rid not in explained_losses:
                    bad.append((rid, code, "the snapshot was lost without the provider's word"))
                continue
            err = error_of((self.recs.get(rid) or {}).get("error"))
            codes = [e["code"] for e in self.events.get(rid, []) if e["code"]] + ([err.get("code")] if err else [])
            sid = self.sandbox_of(rid)
            if provider_word(err) or any(c in TERMINAL_CODES or c == CHECKPOINT_GONE for c in codes) or self.gone(sid):
                continue
            bad.append((rid, code, f"record error codes {codes}, provider now: {self.at_provider(sid) if sid else None}"))
        return bad

    def children_held_parents(self, tracks):
        """A parent's first release must come after every child record it has was released,
        for the children created before the parent's release was asked for (a child created
        while the release is under way cannot stop a release already sent)."""
        pairs = [(t.parent_run_id, t.run_id) for t in tracks if t.variant == "child" and t.parent_run_id]
        self.load_events({r for pair in pairs for r in pair} - set(self.events))
        bad = []
        for parent, child in pairs:
            released = [e["at"] for e in self.events.get(parent, []) if e["type"] == "lifecycle.released"]
            asked = [e["at"] for e in self.events.get(parent, []) if e["type"] == "lifecycle.release_requested"]
            created = (self.runs.get(child) or {}).get("created_at")
            if not released or created is None or created > released[0] or (asked and created > asked[0]):
                continue
            before = [e["type"] for e in self.events.get(child, []) if e["at"] <= released[0]]
            if not before or before[-1] != "lifecycle.released":
                state = before[-1] if before else "new"
                bad.append((parent, child, f"parent released while the child's record was {state}"))
        return bad
