"""What every actor of a chaos run shares: the service, the provider, the counters, the cycle
budget, and the operator's hand (provider registration, the settle sweeper, the watchdog)."""

import sys
import threading
import time

from client import GaveUp
from faults import create_outside_sandbox
from stats import Track


class Context:
    def __init__(self, a, svc, stats, stop, tokens, tenant, pg, provider, replicas):
        self.a = a
        self.seed = a.seed
        self.svc = svc
        self.stats = stats
        self.stop = stop
        self.tokens = tokens
        self.tenant = tenant
        self.pg = pg
        self.provider = provider
        self.replicas = replicas
        self.lease_ttl = a.lease_ttl
        self.cycle_timeout = 120.0 if a.short else 300.0
        self.lock = threading.Lock()
        self.started = 0
        self.finished = 0
        self.outside = []
        self.forgotten = []
        self.failure = None
        self.jobs = None
        self.deadline_hit = False
        self.children = False
        self.proxy = None
        self.meter = None
        self.behaviours = {}
        self.skipped = {}
        self.base_url = provider.url

    def next_cycle(self):
        with self.lock:
            if self.stop.soft.is_set() or self.started >= self.a.cycles:
                return None
            self.started += 1
            return self.started

    def cycle_done(self):
        with self.lock:
            self.finished += 1

    def cycles_started(self):
        with self.lock:
            return self.started

    def runtimes_may_stop(self):
        return self.stop.hard.is_set()

    def adopt(self, run):
        inp = run.get("input") or {}
        t = Track(inp.get("cycle"), inp.get("variant", "snap"), inp.get("flags", {}))
        t.run_id = run["id"]
        t.session_id = run.get("session_id")
        t.parent_run_id = inp.get("parent_run_id")
        self.stats.track(t)
        return t

    def fail(self, msg):
        self.failure = msg
        print(f"chaos: {msg}", file=sys.stderr, flush=True)
        self.stop.soft.set()
        self.stop.hard.set()

    def register_provider(self):
        body = {"provider_id": "local", "base_url": self.base_url, "token": self.provider.token}
        r = self.svc.request("POST", "/v1/admin/providers", self.tokens["admin"], body, budget=30)
        if not r.ok():
            raise RuntimeError(f"registering the provider failed: {r.status} {r.body[:300]!r}")

    def outside_sandbox(self):
        sid, owner = create_outside_sandbox(self.provider, self.seed, len(self.outside) + 1, self.tenant)
        if sid:
            self.outside.append((sid, owner))
            self.stats.inc("outside_sandboxes")
            self.stats.note("outside_sandbox", sandbox_id=sid, owner=owner)

    def watchdog(self, at):
        def watch():
            while time.monotonic() < at:
                if self.stop.hard.wait(1.0):
                    return
            self.deadline_hit = True
            self.fail("global deadline reached: stopping everything")

        threading.Thread(target=watch, name="watchdog", daemon=True).start()

    def progress_until(self, done, until):
        last = 0.0
        while not done() and time.monotonic() < until and not self.stop.hard.is_set():
            time.sleep(0.5)
            if time.monotonic() - last >= 10:
                last = time.monotonic()
                c = self.stats.counts
                print(f"chaos: {self.started} started, {c['cycles_finished']} finished, "
                      f"{c['replica_kills']} replica kills, {c['provider_kills']} provider kills, "
                      f"{c['5xx_outside_kills']} unexplained 5xx", file=sys.stderr, flush=True)

    def sweep_pending(self, swept):
        """Answers interactions that no human is waiting on any more (a cycle that gave up)."""
        rows = self.pg.psql_json(
            "SELECT coalesce(json_agg(json_build_object('id', i.id, 'session_id', i.session_id, "
            "'run_id', i.run_id)), '[]') FROM interactions i WHERE i.status = 'pending'")
        for row in rows:
            t = self.stats.get(row["run_id"])
            if row["id"] in swept or (t is not None and t.done_at is None):
                continue
            swept.add(row["id"])
            path = f"/v1/sessions/{row['session_id']}/interactions/{row['id']}/reply"
            try:
                r = self.svc.request("POST", path, self.tokens["frontend"], {"decision": "approve"}, budget=20)
                self.stats.inc("settle_replies" if r.ok() else f"settle_replies_{r.status}")
                self.stats.note("settle_reply", run_id=row["run_id"], status=r.status)
            except GaveUp:
                pass
