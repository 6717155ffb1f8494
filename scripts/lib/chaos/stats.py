"""Counters and per-run observations shared by every thread of a chaos run."""

import collections
import json
import threading
import time


def percentile(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(q / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


class Stop:
    """`soft`: no new cycles; `hard`: every thread ends now."""

    def __init__(self):
        self.soft = threading.Event()
        self.hard = threading.Event()


class Track:
    """What the clients saw of one run."""

    def __init__(self, cycle, variant, flags):
        self.cycle = cycle
        self.variant = variant
        self.flags = flags
        self.session_id = None
        self.run_id = None
        self.suspend_ok = 0
        self.interaction_id = None
        self.reply_at = None
        self.reply_unacked = False
        self.reply_decision = None
        self.cancel_ok = False
        self.claims = []
        self.resume_claim_at = None
        self.resumed_ok = 0
        self.completed = False
        self.final_status = None
        self.stale_done = False
        self.exec_marker = None
        self.sandbox_id = None
        self.exec_checked = None
        self.notes = []
        self.parent_run_id = None
        self.created_at = time.monotonic()
        self.done_at = None


class Stats:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.tracks = {}
        self.stale_accepted = []
        self.double_answers = []
        self.five_xx = []
        self.log = open(log_path, "a", buffering=1)

    def note(self, kind, **data):
        data["kind"] = kind
        data["t"] = round(time.monotonic(), 3)
        data["wall"] = time.strftime("%H:%M:%S", time.gmtime()) + f"{time.time() % 1:.3f}"[1:]
        self.log.write(json.dumps(data, default=str) + "\n")

    def inc(self, name, n=1):
        with self.lock:
            self.counts[name] += n

    def track(self, t):
        """Registers a run; what runtimes already saw of it (a claim can beat its creator's
        registration) is kept."""
        with self.lock:
            old = self.tracks.get(t.run_id)
            if old is not None:
                for f in ("claims", "resume_claim_at", "suspend_ok", "resumed_ok", "completed", "stale_done",
                          "exec_marker", "exec_checked", "sandbox_id"):
                    setattr(t, f, getattr(old, f))
            self.tracks[t.run_id] = t

    def get(self, run_id):
        with self.lock:
            return self.tracks.get(run_id)

    def conn_error(self, explained, reused, method, path, replica, err):
        with self.lock:
            if explained:
                self.counts["conn_errors_during_kills"] += 1
            elif reused:
                self.counts["conn_errors_stale_keepalive"] += 1
            else:
                self.counts["conn_errors_unexplained"] += 1
        if not explained:
            self.note("conn_error", reused=reused, method=method, path=path, replica=replica, error=err)

    def server_error(self, explained, method, path, replica, status, body):
        with self.lock:
            self.counts["5xx_during_kills" if explained else "5xx_outside_kills"] += 1
            if not explained:
                self.five_xx.append((method, path, replica, status, body))
        self.note("5xx", explained=explained, method=method, path=path, replica=replica, status=status,
                  body=body.decode("utf-8", "replace"))

    def stale_write(self, accepted, what, run_id, resp):
        with self.lock:
            self.counts["stale_writes_tried"] += 1
            if accepted:
                self.stale_accepted.append((what, run_id, resp))
        self.note("stale_write", accepted=accepted, what=what, run_id=run_id, answer=resp)

    def double_answer(self, what, run_id, detail):
        with self.lock:
            self.double_answers.append((what, run_id, detail))
        self.note("double_answer", what=what, run_id=run_id, detail=detail)

    def resume_claimed(self, track, at):
        with self.lock:
            if track.resume_claim_at is None:
                track.resume_claim_at = at
                if track.reply_at is not None:
                    self.note("resume_claimed", run_id=track.run_id, after_reply_ms=round((at - track.reply_at) * 1000))

    def approve_to_resume_samples(self):
        """Seconds from a reply's 2xx to the run's first resume claim (a claim that arrived
        before the reply's answer counts as 0)."""
        with self.lock:
            return [(max(0.0, t.resume_claim_at - t.reply_at), t) for t in self.tracks.values()
                    if t.reply_at is not None and t.resume_claim_at is not None and t.reply_decision == "approve"]
