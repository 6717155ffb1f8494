"""HTTP clients of the service: a random live replica per attempt, retries of lost answers and
5xx under the same Idempotency-Key, and the accounting of every 5xx and connection error."""

import http.client
import json
import random
import socket
import threading
import time
import uuid


class ConnError(Exception):
    pass


class GaveUp(Exception):
    pass


class Resp:
    __slots__ = ("status", "headers", "body", "replica", "replayed")

    def __init__(self, status, headers, body, replica):
        self.status = status
        self.headers = headers
        self.body = body
        self.replica = replica
        self.replayed = headers.get("idempotent-replayed") == "true"

    def json(self):
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def code(self):
        j = self.json()
        return j.get("code") if isinstance(j, dict) else None

    def ok(self):
        return 200 <= self.status < 300


def new_key():
    return uuid.uuid4().hex


class Service:
    """The service behind its replicas, as clients see it."""

    def __init__(self, replicas, stats, stop):
        self.replicas = replicas
        self.stats = stats
        self.stop = stop
        self.local = threading.local()

    def _conns(self):
        c = getattr(self.local, "conns", None)
        if c is None:
            c = self.local.conns = {}
        return c

    def pick(self, exclude=None):
        while not self.stop.hard.is_set():
            live = [r for r in self.replicas if r.up and r is not exclude]
            if not live:
                live = [r for r in self.replicas if r.up]
            if live:
                return random.choice(live)
            time.sleep(0.05)
        raise GaveUp("stopping")

    def call(self, method, path, token, body=None, key=None, timeout=10.0, headers=None, replica=None):
        """One attempt against one replica. Raises ConnError when no answer came back."""
        r = replica or self.pick()
        conns = self._conns()
        entry = conns.get(r.index)
        if entry and entry[1] != r.generation:
            entry[0].close()
            entry = None
        if entry is None:
            entry = [http.client.HTTPConnection("127.0.0.1", r.port, timeout=timeout), r.generation, False]
            conns[r.index] = entry
        conn, gen, reused = entry
        entry[2] = True
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        h = {"authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["content-type"] = "application/json"
        if key:
            h["idempotency-key"] = key
        if headers:
            h.update(headers)
        t0 = time.monotonic()
        try:
            conn.request(method, path, body=data, headers=h)
            res = conn.getresponse()
            payload = res.read()
            hdrs = {k.lower(): v for k, v in res.getheaders()}
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            conn.close()
            conns.pop(r.index, None)
            t1 = time.monotonic()
            explained = (not r.up) or r.generation != gen or r.killed_between(t0 - 0.05, t1 + 0.5)
            self.stats.conn_error(explained, reused, method, path, r.name, repr(e))
            raise ConnError(f"{r.name}: {e!r}") from e
        t1 = time.monotonic()
        if hdrs.get("connection", "").lower() == "close":
            conn.close()
            conns.pop(r.index, None)
        resp = Resp(res.status, hdrs, payload, r)
        if res.status >= 500:
            explained = any(x.killed_between(t0 - 0.2, t1 + 0.5) for x in self.replicas)
            self.stats.server_error(explained, method, path, r.name, res.status, payload[:300])
        return resp

    def request(self, method, path, token, body=None, key=True, timeout=10.0, headers=None,
                readback=None, budget=60.0):
        """Retries lost answers, 5xx and in-flight replays with the same Idempotency-Key until an
        answer comes back. `readback()` is asked after a lost answer; a non-None value means the
        effect is known to have landed and is returned as `("readback", value)`."""
        if key is True:
            key = new_key() if method == "POST" else None
        end = time.monotonic() + budget
        delay = 0.05
        lost = False
        while True:
            if self.stop.hard.is_set():
                raise GaveUp("stopping")
            try:
                resp = self.call(method, path, token, body, key, timeout, headers)
                if resp.status < 500 and not (resp.status == 409 and resp.code == "idempotency.in_flight"):
                    return resp
                lost = True
            except ConnError:
                lost = True
            if lost and readback is not None:
                try:
                    seen = readback()
                except (ConnError, GaveUp):
                    seen = None
                if seen is not None:
                    return ("readback", seen)
            if time.monotonic() > end:
                raise GaveUp(f"{method} {path}: no answer within {budget:.0f}s")
            time.sleep(delay + random.random() * delay)
            delay = min(delay * 2, 1.0)
