"""The promises odd providers test: a snapshot is lost only on a provider's word, a run that
a human approved fails only on one, and a sub-agent's sandbox holds its parent's release."""

import json
import re

TERMINAL_CODES = ("sandbox.lost", "sandbox.kill_failed", "checkpoint.missing", "checkpoint.corrupt")
GONE_CODES = ("release.confirmed_by_inspect", "sandbox.not_found")
CHECKPOINT_GONE = "checkpoint.not_found"
SNAPSHOT_LOST = "sandbox.snapshot_lost"
# A record in these states is already releasing: a `release_requested` entry from one is a retry.
RELEASING = ("release_requested", "release_failed", "needs_attention")
ID = re.compile(r"^[0-9A-Za-z_]+$")


def q_events(run_ids):
    ids = ",".join(f"'{r}'" for r in sorted(run_ids) if r and ID.match(r))
    return ("SELECT coalesce(json_agg(json_build_object('run_id', run_id, 'type', type, 'code', "
            "data::jsonb->>'error_code', 'from', data::jsonb->>'from', 'at', created_at, 'committed', "
            "floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)) "
            "ORDER BY run_id, sequence), '[]') "
            f"FROM execution_resource_events WHERE run_id IN ({ids or 'NULL'})")


def q_run_entries(run_ids):
    """The session log's entries on each run's own state (`run.suspended`, `run.completed`, …)."""
    ids = ",".join(f"'{r}'" for r in sorted(run_ids) if r and ID.match(r))
    return ("SELECT coalesce(json_agg(json_build_object('run_id', r.id, 'type', e.type, 'at', e.created_at, "
            "'committed', floor(extract(epoch FROM pg_xact_commit_timestamp(e.xmin)) * 1000)) "
            "ORDER BY r.id, e.sequence), '[]') FROM runs r JOIN session_events e ON e.session_id = r.session_id "
            "AND e.type LIKE 'run.%' AND e.data::jsonb->>'run_id' = r.id "
            f"WHERE r.id IN ({ids or 'NULL'})")


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
        """Rules 3(b) and 10: a suspended parent asks for its release only once every child
        record that exists is `released`. Judged at each fresh ask (a `release_requested` entry
        not coming from a release already under way) made while the parent's run was suspended,
        for each child whose record surely existed when the ask read the blockers: its creation
        committed before the ask did (the service stamps a write when its transaction begins,
        so a child stamped earlier may commit after the ask: the release then goes on), and its
        run was created before the parent's suspension or its record already has an entry. Not
        promised, so not counted: the end of the parent's run (rule 12 terminates its sandbox
        whatever holds it), and a child that comes back to life after the ask (a release
        already sent goes on)."""
        pairs = [(t.parent_run_id, t.run_id) for t in tracks if t.variant == "child" and t.parent_run_id]
        self.load_events({r for pair in pairs for r in pair} - set(self.events))
        entries = {}
        for e in self.ctx.pg.psql_json(q_run_entries({r for pair in pairs for r in pair})):
            entries.setdefault(e["run_id"], []).append(e)
        bad = []
        for parent, child in pairs:
            created = (self.runs.get(child) or {}).get("created_at")
            if created is None:
                continue
            committed = next((e["committed"] for e in entries.get(child, []) if e["type"] == "run.created"), None)
            for ask in self.events.get(parent, []):
                if ask["type"] != "lifecycle.release_requested" or ask["from"] in RELEASING:
                    continue
                if committed is not None and ask["committed"] is not None and committed > ask["committed"]:
                    continue
                run_state = [e for e in entries.get(parent, []) if e["at"] <= ask["at"]]
                if not run_state or run_state[-1]["type"] != "run.suspended":
                    continue
                before = [e["type"] for e in self.events.get(child, []) if e["at"] <= ask["at"]]
                if not before and created >= run_state[-1]["at"]:
                    continue
                state = before[-1] if before else "lifecycle.provisioning"
                if state != "lifecycle.released":
                    bad.append((parent, child, f"the suspended parent's release was asked at {ask['at']} "
                                               f"while the child's record was {state}"))
        return bad
