"""Record writes while the provider is down: the `version` of every execution-resource record
when the outage begins and when it ends, for the runs resuming at either moment (a human's
answer is in, the sandbox cannot come back yet)."""

import threading
import time

Q_VERSIONS = ("SELECT coalesce(json_agg(json_build_object('run_id', e.run_id, 'version', e.version, "
              "'state', r.state, 'record', e.state)), '[]') FROM execution_resources e JOIN runs r ON r.id = e.run_id")


class OutageMeter:
    def __init__(self, pg, budget, per_minute):
        self.pg = pg
        self.budget = budget
        self.per_minute = per_minute
        self.lock = threading.Lock()
        self.begun = None
        self.outages = []

    def read(self):
        try:
            return {r["run_id"]: r for r in self.pg.psql_json(Q_VERSIONS)}
        except RuntimeError:
            return None

    def begin(self):
        rows = self.read()
        with self.lock:
            self.begun = (time.monotonic(), rows)

    def end(self):
        with self.lock:
            begun, self.begun = self.begun, None
        if begun is None:
            return
        t0, before = begun
        after = self.read()
        seconds = time.monotonic() - t0
        if before is None or after is None:
            self.outages.append({"seconds": round(seconds, 1), "error": "could not read the records"})
            return
        writes = {}
        for rid, b in before.items():
            a = after.get(rid)
            if a is None or "resuming" not in (b["state"], a["state"]):
                continue
            writes[rid] = (a["version"] - b["version"], b["state"], a["state"], a["record"])
        self.outages.append({"seconds": round(seconds, 1), "resuming_runs": len(writes),
                             "bound": self.bound(seconds),
                             "top": sorted(((n, rid, s0, s1, rec) for rid, (n, s0, s1, rec) in writes.items()),
                                           reverse=True)[:10]})

    def bound(self, seconds):
        return int(self.budget + self.per_minute * seconds / 60.0)

    def worst(self):
        """The most writes one resuming run made in one outage, and whether any outage's
        worst run exceeded that outage's bound."""
        worst, over = 0, []
        for o in self.outages:
            top = o.get("top") or []
            if top:
                n, rid = top[0][0], top[0][1]
                worst = max(worst, n)
                if n > o["bound"]:
                    over.append((rid, n, o["bound"], o["seconds"]))
        return worst, over
