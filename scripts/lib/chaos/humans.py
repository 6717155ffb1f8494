"""Frontend side of a cycle: a person creates a session and a run, waits for the approval in
the snapshot, answers it (or cancels the run) and watches the run to its end."""

import random
import threading
import time

from client import ConnError, GaveUp, new_key
from stats import Track

H = "sha256:" + "a" * 64
SPEC_HASH = "sha256:" + "1" * 64
POLICY_HASH = "sha256:" + "2" * 64
TERMINAL = ("completed", "failed", "cancelled")

VARIANTS = [("snap", 60), ("term", 10), ("detach", 10), ("active", 10), ("cancel", 5), ("deny", 5)]


def choose_variant(rng):
    n = rng.randrange(sum(w for _, w in VARIANTS))
    for name, w in VARIANTS:
        if n < w:
            return name
        n -= w
    return "snap"


def choose_flags(rng):
    flags = {}
    if rng.random() < 0.2:
        flags["exec"] = True
    if rng.random() < 0.1:
        flags["job"] = True
    r = rng.random()
    if r < 0.03:
        flags["stale"] = "suspend"
    elif r < 0.06:
        flags["stale"] = "complete"
    if rng.random() < 0.05:
        flags["double"] = True
    if rng.random() < 0.08:
        flags["child"] = True
    return flags


def sandbox_spec(variant, cycle, seed):
    spec = {"spec_version": "sagents.sandbox-spec/v3", "provider_id": "local", "spec_hash": SPEC_HASH,
            "policy_hash": POLICY_HASH, "workspace_mode": "isolated",
            "lifecycle": {"safe_pause_behavior": "snapshot_and_terminate"}}
    if variant == "term":
        spec["lifecycle"] = {"safe_pause_behavior": "terminate"}
    elif variant == "detach":
        spec["lifecycle"] = {"unsafe_pause_behavior": "detach"}
    elif variant == "active":
        spec["workspace_mode"] = "active_workspace"
        spec["host_workspace"] = f"chaos-{seed}-{cycle}"
        spec["lifecycle"] = {"safe_pause_behavior": "terminate"}
    return spec


class Human(threading.Thread):
    def __init__(self, n, ctx):
        super().__init__(name=f"human-{n}", daemon=True)
        self.ctx = ctx
        self.svc = ctx.svc
        self.stats = ctx.stats
        self.token = ctx.tokens["frontend"]
        self.rng = random.Random(f"{ctx.seed}-human-{n}")

    def run(self):
        while not self.ctx.stop.soft.is_set():
            cycle = self.ctx.next_cycle()
            if cycle is None:
                return
            self.current = None
            try:
                self.cycle(cycle)
            except GaveUp as e:
                self.stats.inc("cycles_abandoned")
                self.stats.note("cycle_abandoned", cycle=cycle, error=str(e))
            except Exception as e:
                self.stats.inc("cycles_errored")
                self.stats.note("cycle_error", cycle=cycle, error=repr(e))
            finally:
                if self.current is not None and self.current.done_at is None:
                    self.current.done_at = time.monotonic()
                self.ctx.cycle_done()

    def snapshot(self, sid, etag=None, wait=0):
        path = f"/v1/sessions/{sid}/snapshot" + (f"?wait_seconds={wait}" if wait else "")
        headers = {"if-none-match": etag} if etag else None
        r = self.svc.request("GET", path, self.token, headers=headers, timeout=wait + 8, budget=40)
        if r.status == 304:
            return etag, None
        if r.status != 200:
            raise GaveUp(f"snapshot {sid}: {r.status} {r.body[:200]!r}")
        return r.headers.get("etag"), r.json()

    def find_session(self, title):
        cursor = None
        for _ in range(3):
            path = "/v1/sessions?limit=200" + (f"&cursor={cursor}" if cursor else "")
            r = self.svc.call("GET", path, self.token)
            if r.status != 200:
                return None
            page = r.json()
            for s in page["sessions"]:
                if s.get("title") == title:
                    return s
            cursor = page.get("next_cursor")
            if not cursor:
                return None
        return None

    def run_in_snapshot(self, sid):
        r = self.svc.call("GET", f"/v1/sessions/{sid}/snapshot", self.token)
        if r.status == 200 and r.json()["runs"]:
            return r.json()["runs"][0]
        return None

    def cycle(self, cycle):
        ctx = self.ctx
        variant = choose_variant(self.rng)
        flags = choose_flags(self.rng)
        title = f"chaos-{ctx.seed}-{cycle}"
        r = self.svc.request("POST", "/v1/sessions", self.token, {"title": title, "metadata": {"cycle": cycle}},
                             readback=lambda: self.find_session(title), budget=60)
        session = r[1] if isinstance(r, tuple) else self.expect(r, 201, "create session")
        sid = session["id"]
        body = {"resolved_spec_hash": H, "sandbox_spec": sandbox_spec(variant, cycle, ctx.seed),
                "input": {"cycle": cycle, "variant": variant, "flags": flags}}
        t = Track(cycle, variant, flags)
        t.session_id = sid
        r = self.svc.request("POST", f"/v1/sessions/{sid}/runs", ctx.tokens["runtime"], body,
                             readback=lambda: self.run_in_snapshot(sid), budget=60)
        run = r[1] if isinstance(r, tuple) else self.expect(r, 201, "create run")
        t.run_id = run["id"]
        self.current = t
        self.stats.track(t)
        self.stats.inc("cycles_started")
        self.stats.inc(f"variant_{variant}")
        if flags.get("child") and ctx.children and variant in ("snap", "term", "deny"):
            self.sub_agent(sid, t, title)
        deadline = time.monotonic() + ctx.cycle_timeout
        interaction = self.wait_for(sid, t, deadline, lambda snap: snap["pending_interactions"])
        if interaction is not None:
            self.think()
            if variant == "cancel":
                self.cancel(sid, t)
            else:
                self.answer(sid, t, interaction, "deny" if variant == "deny" else "approve")
        final = self.wait_for(sid, t, deadline, lambda snap: snap["runs"][0]["status"] in TERMINAL)
        if final is None:
            t.notes.append("cycle timed out before the run ended")
            self.stats.inc("cycles_timed_out")
        t.done_at = time.monotonic()
        self.stats.inc("cycles_finished")

    def sub_agent(self, sid, parent, title):
        """A child session with a child run naming the parent run: its sandbox must hold the
        parent's release until it is released itself. A refusal is counted, the cycle goes on."""
        ctx = self.ctx
        child_title = f"{title}-child"
        r = self.svc.request("POST", "/v1/sessions", self.token,
                             {"title": child_title, "parent_session_id": sid, "metadata": {"parent_run": parent.run_id}},
                             readback=lambda: self.find_session(child_title), budget=60)
        session = r[1] if isinstance(r, tuple) else self.expect(r, 201, "create child session")
        csid = session["id"]
        body = {"resolved_spec_hash": H, "sandbox_spec": sandbox_spec("term", parent.cycle, ctx.seed),
                "parent_run_id": parent.run_id,
                "input": {"cycle": parent.cycle, "variant": "child", "flags": {}, "parent_run_id": parent.run_id}}
        r = self.svc.request("POST", f"/v1/sessions/{csid}/runs", ctx.tokens["runtime"], body,
                             readback=lambda: self.run_in_snapshot(csid), budget=60)
        if not isinstance(r, tuple) and r.status != 201:
            self.stats.inc(f"child_runs_refused_{r.status}")
            self.stats.note("child_run_refused", parent=parent.run_id, status=r.status,
                            body=r.body[:300].decode("utf-8", "replace"))
            return
        run = r[1] if isinstance(r, tuple) else r.json()
        child = Track(parent.cycle, "child", {})
        child.run_id = run["id"]
        child.session_id = csid
        child.parent_run_id = parent.run_id
        self.stats.track(child)
        self.stats.inc("child_runs")

    def expect(self, r, status, what):
        if r.status != status:
            self.stats.note("unexpected", what=what, status=r.status, body=r.body[:300].decode("utf-8", "replace"))
            raise GaveUp(f"{what}: {r.status}")
        return r.json()

    def think(self):
        x = self.rng.random()
        if x < 0.3:
            time.sleep(self.rng.random() * 0.05)
        elif x < 0.85:
            time.sleep(0.1 + self.rng.random() * 0.9)
        else:
            time.sleep(1 + self.rng.random() * 2)

    def wait_for(self, sid, t, deadline, cond):
        etag = None
        snap = None
        while time.monotonic() < deadline and not self.ctx.stop.hard.is_set():
            new_etag, got = self.snapshot(sid, etag, wait=3 if etag else 0)
            if got is not None:
                snap, etag = got, new_etag
                if snap["runs"]:
                    t.final_status = snap["runs"][0]["status"]
                hit = cond(snap)
                if hit:
                    return hit[0] if isinstance(hit, list) else snap
                if snap["runs"] and snap["runs"][0]["status"] in TERMINAL:
                    return None
        return None

    def interaction_answered(self, sid, iid):
        r = self.svc.call("GET", f"/v1/sessions/{sid}/snapshot", self.token)
        if r.status != 200:
            return None
        snap = r.json()
        if any(p["id"] == iid for p in snap["pending_interactions"]):
            return None
        return snap

    def answer(self, sid, t, interaction, decision):
        iid = interaction["id"]
        t.interaction_id = iid
        t.reply_decision = decision
        path = f"/v1/sessions/{sid}/interactions/{iid}/reply"
        r = self.svc.request("POST", path, self.token, {"decision": decision},
                             readback=lambda: self.interaction_answered(sid, iid), budget=60)
        now = time.monotonic()
        if isinstance(r, tuple):
            t.reply_unacked = True
            self.stats.inc("replies_landed_unanswered")
        elif r.ok():
            with self.stats.lock:
                t.reply_at = now
            self.stats.inc("replies_ok")
            self.stats.note("replied", run_id=t.run_id, decision=decision, replica=r.replica.name)
        elif r.status == 409 and r.code == "interaction.not_pending":
            t.reply_unacked = True
            self.stats.inc("replies_not_pending")
            self.stats.note("reply_not_pending", run_id=t.run_id, interaction_id=iid)
        else:
            self.stats.inc("replies_refused")
            self.stats.note("reply_refused", run_id=t.run_id, status=r.status, body=r.body[:300].decode())
            return
        if t.flags.get("double"):
            second = "approve" if decision == "deny" else "deny"
            try:
                r2 = self.svc.request("POST", path, self.token, {"decision": second}, key=new_key(), budget=30)
            except GaveUp:
                return
            self.stats.inc("second_replies_tried")
            if r2.ok():
                self.stats.double_answer("second reply accepted", t.run_id, r2.body[:300].decode())
            elif not (r2.status == 409 and r2.code == "interaction.not_pending"):
                self.stats.note("second_reply", run_id=t.run_id, status=r2.status, body=r2.body[:300].decode())

    def cancel(self, sid, t):
        path = f"/v1/sessions/{sid}/runs/{t.run_id}/cancel"

        def cancelled():
            run = self.run_in_snapshot(sid)
            return run if run and run["status"] == "cancelled" else None

        try:
            r = self.svc.request("POST", path, self.token, None, readback=cancelled, budget=60)
        except (ConnError, GaveUp):
            return
        if isinstance(r, tuple) or r.ok():
            t.cancel_ok = True
            self.stats.inc("cancels_ok")
        else:
            self.stats.note("cancel_refused", run_id=t.run_id, status=r.status, body=r.body[:300].decode())
