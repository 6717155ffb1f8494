"""Steady traffic through nginx while one replica after the other is stopped (SIGTERM, SIGKILL
after a grace period) and started again. A replica that stops by itself on SIGTERM finishes
what it was serving and refuses the rest, so nginx can place every request: no client may see
an error. Only when it is SIGKILLed (a crash, or a shutdown past its grace period) may the
requests in flight on it fail."""

import signal
import threading
import time

from client import Client, Failed, expect, new_key, H
from checks import log

# (name, role, method, expected statuses); paths are filled in per session.
OPS = [("snapshot", "frontend", "GET", (200,)),
       ("snapshot_long_poll", "frontend", "GET", (200, 304)),
       ("create_session", "frontend", "POST", (201,)),
       ("inbox", "frontend", "GET", (200,)),
       ("create_run", "runtime", "POST", (201,))]


class Traffic:
    def __init__(self, stack, clients):
        self.stack = stack
        self.c = Client(stack.nginx.port, "nginx")
        self.clients = clients
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.results = []
        t = stack.tokens
        s = expect(self.c.request("POST", "/v1/sessions", t["frontend"], {"title": "traffic"}, key=new_key()),
                   (201,), "create session")
        self.sid = s["id"]
        r = self.c.request("GET", f"/v1/sessions/{self.sid}/snapshot", t["frontend"])
        expect(r, (200,), "snapshot")
        self.etag = r.headers.get("etag")
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(clients)]

    def one(self, i, n):
        name, role, method, ok = OPS[(i + n) % len(OPS)]
        token = self.stack.tokens[role]
        sid = self.sid
        if name == "snapshot":
            r = self.c.request("GET", f"/v1/sessions/{sid}/snapshot", token)
        elif name == "snapshot_long_poll":
            r = self.c.request("GET", f"/v1/sessions/{sid}/snapshot?wait_seconds=1", token,
                               headers={"if-none-match": self.etag})
        elif name == "create_session":
            r = self.c.request("POST", "/v1/sessions", token, {"title": f"traffic {i}-{n}"}, key=new_key())
        elif name == "inbox":
            r = self.c.request("GET", "/v1/interactions?status=pending&limit=10", token)
        else:
            r = self.c.request("POST", f"/v1/sessions/{sid}/runs", token,
                               {"resolved_spec_hash": H, "input": {"n": n}}, key=new_key())
        with self.lock:
            self.results.append((name, method, ok, r))

    def client(self, i):
        n = 0
        while not self.stop.is_set():
            self.one(i, n)
            n += 1

    def start(self):
        for th in self.threads:
            th.start()

    def finish(self):
        self.stop.set()
        for th in self.threads:
            th.join(30)

    def served_by(self, upstream, since):
        log_ = self.stack.nginx.access_log()
        with self.lock:
            ids = [r.request_id for _, _, _, r in self.results if r.t0 >= since]
        return sum(1 for rid in ids if rid in log_ and log_[rid][2][-1:] == [upstream])


def wait_until(cond, within, what):
    end = time.monotonic() + within
    while not cond():
        if time.monotonic() > end:
            raise Failed(f"{what} within {within:.0f}s")
        time.sleep(0.1)


def check_stop(stack, clients=4, grace=10.0, alone=6.0):
    """Stops A, then B, each with SIGTERM (SIGKILL after `grace`), then crashes A (SIGKILL
    outright); after each, the other replica serves alone past nginx's fail_timeout, and the
    stopped one is started again until nginx sends it requests."""
    traffic = Traffic(stack, clients)
    traffic.start()
    stops = []
    try:
        t_start = time.monotonic()
        for name in ("a", "b"):
            wait_until(lambda: traffic.served_by(stack.upstream(name), t_start) >= 20, 15,
                       f"replica {name} did not serve 20 requests through nginx")
        for name, crash in (("a", False), ("b", False), ("a", True)):
            replica = stack.replica(name)
            t_term = time.monotonic()
            if crash:
                replica.kill(signal.SIGKILL)
                clean, t_exit = False, time.monotonic()
                how = "SIGKILLed (a crash)"
            else:
                clean, t_exit = replica.terminate(grace)
                how = "stopped by SIGTERM" if clean else "stopped by SIGKILL after the grace period"
            stops.append((name, t_term, t_exit, clean))
            log(f"replica {name} {how} in {(t_exit - t_term) * 1000:.0f} ms during traffic")
            time.sleep(alone)  # the other replica alone, past nginx's fail_timeout (5 s)
            replica.start()
            t_back = time.monotonic()
            wait_until(lambda: traffic.served_by(stack.upstream(name), t_back) >= 5, 15,
                       f"nginx did not send requests to replica {name} again after its restart")
    finally:
        traffic.finish()
    return analyse(stack, traffic, stops)


def analyse(stack, traffic, stops):
    access = stack.nginx.access_log()
    errors, attributable, retried, retried_writes = [], [], 0, 0
    for name, method, ok, r in traffic.results:
        entry = access.get(r.request_id)
        if entry and len(entry[2]) > 1:
            retried += 1
            retried_writes += method == "POST"
        if r.status in ok:
            continue
        ups = entry[2] if entry else []
        on_killed = any(not clean and stack.upstream(n) in ups and r.t0 <= t_exit and r.t1 >= t_term
                        for n, t_term, t_exit, clean in stops)
        (attributable if on_killed else errors).append((name, method, r, entry))
    total = len(traffic.results)
    by_op = {}
    for name, *_ in traffic.results:
        by_op[name] = by_op.get(name, 0) + 1
    log(f"traffic: {total} requests ({', '.join(f'{k} {v}' for k, v in sorted(by_op.items()))}), "
        f"{retried} retried by nginx on the other replica ({retried_writes} of them POSTs with an "
        f"Idempotency-Key), {len(attributable)} errors in flight on a SIGKILLed "
        f"replica, {len(errors)} other errors")
    for name, method, r, entry in (errors + attributable)[:10]:
        log(f"  error: {name} {method} {r!r} request_id={r.request_id} nginx={entry}")
    if errors:
        raise Failed(f"{len(errors)} requests failed that were not in flight on a SIGKILLed replica")
    return f"{total} requests, {len(errors) + len(attributable)} errors ({len(attributable)} in flight on a SIGKILLed replica), {retried} retried ({retried_writes} keyed POSTs)"
