"""Agent runtimes: claim runs, keep their leases, work in the sandbox, suspend for approval,
confirm the resume and complete; some stall on purpose and write with their stale lease."""

import http.client
import json
import random
import threading
import time

from client import ConnError, GaveUp, new_key
from humans import H, POLICY_HASH, SPEC_HASH, TERMINAL


class Heartbeat(threading.Thread):
    """Renews the one lease its worker holds, every quarter of the TTL, and keeps the fresh
    sandbox grant each renewal answers."""

    def __init__(self, worker):
        super().__init__(name=f"hb-{worker.wid}", daemon=True)
        self.w = worker
        self.lock = threading.Lock()
        self.lease = None
        self.lost = False
        self.grant = None

    def hold(self, lease_id, token):
        with self.lock:
            self.lease, self.lost, self.grant = (lease_id, token), False, None

    def latest_grant(self):
        with self.lock:
            return self.grant

    def drop(self):
        with self.lock:
            self.lease = None

    def run(self):
        ctx = self.w.ctx
        period = ctx.lease_ttl / 4
        while not ctx.stop.hard.is_set():
            time.sleep(period)
            with self.lock:
                lease = self.lease
            if lease is None:
                continue
            lid, token = lease
            try:
                r = ctx.svc.request("POST", f"/v1/runtime/leases/{lid}/heartbeat", ctx.tokens["runtime"],
                                    {"fencing_token": token}, key=None, timeout=2, budget=period * 2)
            except GaveUp:
                continue
            if r.status == 409:
                with self.lock:
                    if self.lease == lease:
                        self.lost = True
            elif r.ok() and isinstance(r.json(), dict) and r.json().get("grant"):
                with self.lock:
                    if self.lease == lease:
                        self.grant = r.json()["grant"]


class Runtime(threading.Thread):
    def __init__(self, n, ctx):
        super().__init__(name=f"runtime-{n}", daemon=True)
        self.wid = f"chaos-rt-{n}"
        self.ctx = ctx
        self.svc = ctx.svc
        self.stats = ctx.stats
        self.token = ctx.tokens["runtime"]
        self.rng = random.Random(f"{ctx.seed}-rt-{n}")
        self.hb = Heartbeat(self)

    def run(self):
        self.hb.start()
        while not self.ctx.stop.hard.is_set():
            if self.ctx.runtimes_may_stop():
                return
            try:
                claims = self.claim()
            except GaveUp:
                continue
            for c in claims:
                try:
                    self.handle(c)
                except GaveUp as e:
                    self.stats.note("claim_abandoned", run_id=c["run"]["id"], error=str(e))
                except Exception as e:
                    self.stats.inc("runtime_errors")
                    self.stats.note("runtime_error", run_id=c["run"]["id"], error=repr(e))
                finally:
                    self.hb.drop()

    def claim(self):
        key = new_key()
        body = {"worker_id": self.wid, "max": 1, "wait_seconds": 3}
        for _ in range(4):
            try:
                r = self.svc.call("POST", "/v1/runtime/claims", self.token, body, key, timeout=12)
            except ConnError:
                time.sleep(0.05)
                continue
            if r.status == 200:
                claims = r.json()["claims"]
                if claims:
                    self.stats.inc("claims")
                    if r.replayed:
                        self.stats.inc("claims_replayed")
                return claims
            if r.status == 409 and r.code == "idempotency.in_flight":
                key = new_key()
            time.sleep(0.1)
        return []

    def run_state(self, rid):
        r = self.svc.call("GET", f"/v1/runs/{rid}", self.token)
        return r.json() if r.status == 200 else None

    def write(self, rid, what, body, landed):
        """A fenced write, retried under one key; `landed(readback)` tells a lost answer's fate."""

        def readback():
            rb = self.run_state(rid)
            return rb if rb is not None and landed(rb) else None

        r = self.svc.request("POST", f"/v1/runs/{rid}/{what}", self.token, body, readback=readback, budget=40)
        if isinstance(r, tuple):
            self.stats.inc(f"{what}_landed_unanswered")
            return "landed", None
        if r.ok():
            return ("replayed" if r.replayed else "ok"), r.json()
        self.stats.inc(f"{what}_refused_{r.code or r.status}")
        return "refused", r

    def handle(self, c):
        now = time.monotonic()
        run = c["run"]
        rid = run["id"]
        token = c["lease"]["fencing_token"]
        lid = c["lease"]["lease_id"]
        t = self.stats.get(rid)
        if t is None:
            self.stats.inc("claims_of_untracked_runs")
            t = self.ctx.adopt(run)
        with self.stats.lock:
            t.claims.append((now, c["kind"], run["state"], token, self.wid))
            if c.get("sandbox"):
                t.sandbox_id = c["sandbox"]["ref"]["sandbox_id"]
        self.stats.note("claim", run_id=rid, claim=c["kind"], state=run["state"], token=token, worker=self.wid)
        if c["kind"] == "resume" and run["state"] == "resuming":
            self.stats.resume_claimed(t, now)
        flags = run["input"].get("flags", {})
        self.hb.hold(lid, token)
        if t.variant == "child":
            self.sub_agent(t, rid, token)
        elif not c.get("checkpoint"):
            self.before_pause(c, t, rid, token, lid, flags)
        else:
            self.after_pause(c, t, rid, token, lid, flags)

    def before_pause(self, c, t, rid, token, lid, flags):
        if flags.get("stale") == "suspend" and not t.stale_done:
            t.stale_done = True
            self.stale(t, rid, token, lid, "suspend", self.suspend_body(t, rid, token, flags))
            return
        if flags.get("exec") and c.get("sandbox"):
            marker = f"cycle-{t.cycle}-{self.rng.randrange(1 << 30)}"
            out = self.exec(c["sandbox"], ["sh", "-c", f"echo {marker} > notes.txt"])
            if out is not None and out.get("exit_code") == 0:
                t.exec_marker = marker
        if flags.get("job"):
            self.job(rid, token, t)
        if self.hb.lost:
            return
        self.stats.note("suspending", run_id=rid, worker=self.wid)
        outcome, _ = self.write(rid, "suspend", self.suspend_body(t, rid, token, flags),
                                lambda rb: rb["latest_suspension_id"] is not None and rb["run"]["state"] != "running")
        if outcome in ("ok", "landed"):
            with self.stats.lock:
                t.suspend_ok += 1

    def sub_agent(self, t, rid, token):
        """A sub-agent works a while (its parent meanwhile suspends), then completes."""
        time.sleep(0.5 + self.rng.random() * 2.0)
        if self.hb.lost:
            return
        outcome, _ = self.write(rid, "complete", {"fencing_token": token, "output": {"sub_agent": True}},
                                lambda rb: rb["run"]["state"] == "completed")
        if outcome in ("ok", "landed"):
            t.completed = True
            t.done_at = time.monotonic()

    def suspend_body(self, t, rid, token, flags):
        reason = "policy_hold" if t.variant == "detach" else "approval_required"
        return {"fencing_token": token, "reason": reason,
                "checkpoint": {"codec_version": "v1", "sequence": 1, "state": {"cycle": t.cycle},
                               "resolved_spec_hash": H},
                "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                                "payload": {"command": f"deploy cycle {t.cycle}"}}}

    def after_pause(self, c, t, rid, token, lid, flags):
        run = c["run"]
        if run["state"] == "resuming":
            body = {"fencing_token": token, "resolved_spec_hash": H, "spec_hash": SPEC_HASH,
                    "policy_hash": POLICY_HASH}
            mine = lambda rb: rb["run"]["state"] != "resuming" and (rb.get("lease") or {}).get("worker_id") == self.wid
            outcome, res = self.write(rid, "resumed", body, mine)
            if outcome in ("ok", "landed"):
                with self.stats.lock:
                    t.resumed_ok += 1
                    n = t.resumed_ok
                if n > max(1, t.suspend_ok):
                    self.stats.double_answer("resumed confirmed twice", rid, f"{n} confirmations")
            elif outcome == "refused":
                if res.code == "sandbox.policy_stale":
                    self.stats.note("policy_stale", run_id=rid, body=res.body[:300].decode())
                return
        elif run["state"] in TERMINAL:
            return
        if t.exec_marker and t.variant in ("snap", "detach", "active", "deny") and c.get("sandbox"):
            out = self.exec(c["sandbox"], ["cat", "notes.txt"])
            if out is not None:
                t.exec_checked = out.get("stdout", "").strip() == t.exec_marker
                self.stats.inc("files_checked")
                if not t.exec_checked:
                    self.stats.inc("files_missing_after_restore")
                    self.stats.note("files_missing", run_id=rid, variant=t.variant, out=out)
        if flags.get("stale") == "complete" and not t.stale_done:
            t.stale_done = True
            self.stale(t, rid, token, lid, "complete", {"fencing_token": token, "output": {"stale": True}})
            return
        if self.hb.lost:
            return
        outcome, _ = self.write(rid, "complete", {"fencing_token": token, "output": {"cycle": t.cycle}},
                                lambda rb: rb["run"]["state"] == "completed")
        if outcome in ("ok", "landed"):
            t.completed = True

    def stale(self, t, rid, token, lid, what, body):
        """Stalls past the lease TTL without heartbeats, waits until another worker took the run
        over (or it moved on), then writes with the old token: every such write must be refused."""
        self.hb.drop()
        self.stats.inc(f"stalls_{what}")
        time.sleep(self.ctx.lease_ttl + 0.8)
        end = time.monotonic() + 30
        while time.monotonic() < end and not self.ctx.stop.hard.is_set():
            try:
                rb = self.run_state(rid)
            except ConnError:
                rb = None
            if rb is not None:
                holder = (rb.get("lease") or {}).get("worker_id")
                if (holder and holder != self.wid) or rb["run"]["state"] != "running":
                    break
            time.sleep(0.2)
        for path, payload in ((f"/v1/runs/{rid}/{what}", body),
                              (f"/v1/runtime/leases/{lid}/heartbeat", {"fencing_token": token})):
            try:
                r = self.svc.request("POST", path, self.token, payload, budget=30)
            except GaveUp:
                continue
            self.stats.stale_write(r.ok(), path.rsplit("/", 1)[-1], rid,
                                   f"{r.status} {r.body[:200].decode('utf-8', 'replace')}")

    def exec(self, sandbox, argv):
        p = self.ctx.provider
        body = json.dumps({"argv": argv, "timeout_seconds": 10}).encode()
        grant = self.hb.latest_grant() or sandbox["grant"]
        path = f"/v3/sandboxes/{sandbox['ref']['sandbox_id']}/exec"
        for _ in range(20):
            conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
            try:
                conn.request("POST", path, body=body, headers={"authorization": f"Bearer {grant}",
                                                               "content-type": "application/json"})
                res = conn.getresponse()
                data = res.read()
                if res.status == 200:
                    return json.loads(data)
                self.stats.inc(f"exec_refused_{res.status}")
                self.stats.note("exec_refused", sandbox=sandbox["ref"]["sandbox_id"], argv=argv, status=res.status,
                                body=data[:300].decode("utf-8", "replace"))
                return None
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.25)
            finally:
                conn.close()
        self.stats.inc("exec_unreachable")
        return None

    def job(self, rid, token, t):
        kind = f"build-{t.cycle}"

        def listed():
            r = self.svc.call("GET", f"/v1/runs/{rid}/jobs", self.token)
            if r.status != 200:
                return None
            return next((j for j in r.json()["jobs"] if j["kind"] == kind), None)

        body = {"fencing_token": token, "kind": kind, "pause_behavior": "detach", "execution_affinity": "sandbox"}
        r = self.svc.request("POST", f"/v1/runs/{rid}/jobs", self.token, body, readback=listed, budget=30)
        job = r[1] if isinstance(r, tuple) else (r.json() if r.ok() else None)
        if job is None:
            self.stats.inc("jobs_refused")
            return
        self.stats.inc("jobs_created")
        self.ctx.jobs.later(rid, job["id"], 0.3 + self.rng.random() * 2.0)


class JobFinisher(threading.Thread):
    """Finishes background jobs some time after their run suspended (no fencing token)."""

    def __init__(self, ctx):
        super().__init__(name="jobs", daemon=True)
        self.ctx = ctx
        self.lock = threading.Lock()
        self.due = []

    def later(self, rid, jid, delay):
        with self.lock:
            self.due.append((time.monotonic() + delay, rid, jid))

    def pending(self):
        with self.lock:
            return len(self.due)

    def run(self):
        ctx = self.ctx
        while not ctx.stop.hard.is_set():
            now = time.monotonic()
            with self.lock:
                ready = [d for d in self.due if d[0] <= now]
                self.due = [d for d in self.due if d[0] > now]
            for _, rid, jid in ready:
                try:
                    r = ctx.svc.request("PATCH", f"/v1/runs/{rid}/jobs/{jid}", ctx.tokens["runtime"],
                                        {"state": "completed"}, key=None, budget=30)
                    ctx.stats.inc("jobs_finished" if r.ok() else f"jobs_finish_{r.code or r.status}")
                except GaveUp:
                    ctx.stats.inc("jobs_finish_gave_up")
            time.sleep(0.1)
