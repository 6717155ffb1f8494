"""A small HTTP client of the service: one keep-alive connection per thread and base URL,
a fresh X-Request-Id on every request (to find it in nginx's access log), JSON bodies."""

import http.client
import json
import socket
import threading
import time
import uuid

H = "sha256:" + "a" * 64
SPEC_HASH = "sha256:" + "1" * 64
POLICY_HASH = "sha256:" + "2" * 64


class Resp:
    __slots__ = ("status", "headers", "body", "request_id", "t0", "t1", "error")

    def __init__(self, status, headers, body, request_id, t0, t1, error=None):
        self.status, self.headers, self.body = status, headers, body
        self.request_id, self.t0, self.t1, self.error = request_id, t0, t1, error

    def json(self):
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def code(self):
        j = self.json()
        return j.get("code") if isinstance(j, dict) else None

    def __repr__(self):
        if self.error:
            return f"<no answer: {self.error}>"
        return f"<{self.status} {self.body[:300].decode('utf-8', 'replace')}>"


class Client:
    def __init__(self, port, name):
        self.port = port
        self.name = name
        self.local = threading.local()

    def _conn(self, timeout):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def request(self, method, path, token, body=None, key=None, headers=None, timeout=30.0):
        """One attempt. A lost answer comes back as status 0 with `error` set."""
        rid = uuid.uuid4().hex
        h = {"authorization": f"Bearer {token}", "x-request-id": rid}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["content-type"] = "application/json"
        if key:
            h["idempotency-key"] = key
        if headers:
            h.update(headers)
        conn = self._conn(timeout)
        t0 = time.monotonic()
        try:
            conn.request(method, path, body=data, headers=h)
            res = conn.getresponse()
            payload = res.read()
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            conn.close()
            self.local.conn = None
            return Resp(0, {}, b"", rid, t0, time.monotonic(), repr(e))
        t1 = time.monotonic()
        hdrs = {k.lower(): v for k, v in res.getheaders()}
        if hdrs.get("connection", "").lower() == "close":
            conn.close()
            self.local.conn = None
        return Resp(res.status, hdrs, payload, rid, t0, t1)

    def close(self):
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
            self.local.conn = None


def new_key():
    return uuid.uuid4().hex


class Failed(AssertionError):
    pass


def expect(r, statuses, what):
    if r.status not in statuses:
        raise Failed(f"{what}: expected {statuses}, got {r!r}")
    return r.json()


def sandbox_spec():
    return {"spec_version": "sagents.sandbox-spec/v3", "provider_id": "local", "spec_hash": SPEC_HASH,
            "policy_hash": POLICY_HASH, "workspace_mode": "isolated",
            "lifecycle": {"safe_pause_behavior": "snapshot_and_terminate"}}


def suspend_body(token, label):
    return {"fencing_token": token, "reason": "approval_required",
            "checkpoint": {"codec_version": "v1", "sequence": 1, "state": {"label": label},
                           "resolved_spec_hash": H},
            "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                            "payload": {"command": f"deploy {label}"}}}


def resumed_body(token):
    return {"fencing_token": token, "resolved_spec_hash": H, "spec_hash": SPEC_HASH, "policy_hash": POLICY_HASH}
