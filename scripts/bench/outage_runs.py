"""The runs of the outage benchmark, driven through the service's API as a frontend and a
runtime would: sessions with one run each in an isolated sandbox released by
`snapshot_and_terminate`, claimed, suspended for an approval, approved, claimed again."""

import http.client
import json
import threading
import time
import uuid

H = "sha256:" + "a" * 64
SPEC_HASH = "sha256:" + "1" * 64
POLICY_HASH = "sha256:" + "2" * 64
THREADS = 4


class ApiError(RuntimeError):
    pass


class Api:
    """One keep-alive connection per thread to one replica."""

    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def call(self, method, path, token, body=None, timeout=30.0):
        headers = {"authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if method == "POST":
            headers["idempotency-key"] = uuid.uuid4().hex
        for attempt in range(2):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            conn.timeout = timeout
            try:
                conn.request(method, path, body=data, headers=headers)
                res = conn.getresponse()
                raw = res.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
                continue
            return res.status, (json.loads(raw) if raw else None)

    def expect(self, status, method, path, token, body=None, timeout=30.0):
        got, payload = self.call(method, path, token, body, timeout)
        if got != status:
            raise ApiError(f"{method} {path}: {got} {json.dumps(payload)[:300]}")
        return payload


def sandbox_spec():
    return {"spec_version": "sagents.sandbox-spec/v3", "provider_id": "local", "spec_hash": SPEC_HASH,
            "policy_hash": POLICY_HASH, "workspace_mode": "isolated",
            "lifecycle": {"safe_pause_behavior": "snapshot_and_terminate"}}


def parallel(items, fn):
    """`fn(item)` over `items` in a few threads; the first error is raised."""
    out, errors, lock = {}, [], threading.Lock()
    chunks = [items[i::THREADS] for i in range(THREADS)]

    def work(chunk):
        for item in chunk:
            try:
                key, value = fn(item)
            except Exception as e:
                with lock:
                    errors.append(e)
                return
            with lock:
                out[key] = value

    ts = [threading.Thread(target=work, args=(c,)) for c in chunks if c]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return out


def create(api, tokens, n):
    """N sessions with one run each; returns {run_id: session_id}."""

    def one(i):
        s = api.expect(201, "POST", "/v1/sessions", tokens["frontend"], {"title": f"outage-{i}"})
        body = {"resolved_spec_hash": H, "sandbox_spec": sandbox_spec(), "input": {"i": i}}
        run = api.expect(201, "POST", f"/v1/sessions/{s['id']}/runs", tokens["runtime"], body)
        return run["id"], s["id"]

    return parallel(list(range(n)), one)


def claim(api, token, want, kind, timeout, wait=5):
    """Long-polls claims until every run of `want` was offered as `kind`; returns
    {run_id: (monotonic time the offer arrived, claim)}. Other offers are an error."""
    got = {}
    end = time.monotonic() + timeout
    while len(got) < len(want) and time.monotonic() < end:
        body = {"worker_id": "bench-outage", "max": min(100, len(want) - len(got)), "wait_seconds": wait}
        claims = api.expect(200, "POST", "/v1/runtime/claims", token, body, timeout=wait + 30)["claims"]
        at = time.monotonic()
        for c in claims:
            rid = c["run"]["id"]
            if rid not in want or c["kind"] != kind:
                raise ApiError(f"unexpected {c['kind']} claim of run {rid} in state {c['run']['state']}")
            got[rid] = (at, c)
    return got


def suspend(api, token, claims):
    def one(item):
        rid, (_, c) = item
        body = {"fencing_token": c["lease"]["fencing_token"], "reason": "approval_required",
                "checkpoint": {"codec_version": "v1", "sequence": 1, "state": {"step": 1}, "resolved_spec_hash": H},
                "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                                "payload": {"command": "deploy"}}}
        api.expect(200, "POST", f"/v1/runs/{rid}/suspend", token, body)
        return rid, True

    parallel(list(claims.items()), one)


def reply_paths(api, token, sessions):
    """{run_id: the reply path of its pending approval}."""

    def one(item):
        rid, sid = item
        snap = api.expect(200, "GET", f"/v1/sessions/{sid}/snapshot", token)
        pending = [p for p in snap["pending_interactions"] if p.get("run_id", rid) == rid]
        if len(pending) != 1:
            raise ApiError(f"run {rid}: {len(pending)} pending interactions")
        return rid, f"/v1/sessions/{sid}/interactions/{pending[0]['id']}/reply"

    return parallel(list(sessions.items()), one)


def approve(api, token, paths):
    """Approves every interaction; returns {run_id: monotonic time its answer arrived}."""

    def one(item):
        rid, path = item
        api.expect(200, "POST", path, token, {"decision": "approve"})
        return rid, time.monotonic()

    return parallel(list(paths.items()), one)
