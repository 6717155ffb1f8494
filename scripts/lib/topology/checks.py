"""The checks of `scripts/topology test`, each against the running Stack."""

import http.client
import json
import re
import threading
import time

from client import Client, Failed, expect, new_key, resumed_body, sandbox_spec, suspend_body, H
from stack import DOCKER, NGINX_VARS, read_env, template_vars


def log(msg):
    print(f"topology: {msg}", flush=True)


def check_config(stack):
    """nginx.conf's variables are the ones compose.yaml sets for the nginx image and the ones
    the topology sets; every .env.example key is used by compose.yaml."""
    conf = template_vars((DOCKER / "nginx.conf").read_text())
    compose = (DOCKER / "compose.yaml").read_text()
    if conf != sorted(NGINX_VARS):
        raise Failed(f"nginx.conf uses {conf}, the topology sets {sorted(NGINX_VARS)}")
    unset = [v for v in conf if not re.search(rf"^\s+{v}:", compose, re.M)]
    if unset:
        raise Failed(f"compose.yaml does not set {unset} for nginx")
    unused = [k for k in read_env(DOCKER / ".env.example") if not re.search(rf"\b{k}\b", compose)]
    if unused:
        raise Failed(f"compose.yaml does not use {unused} from .env.example")
    return f"{len(conf)} nginx template variables, {len(read_env(DOCKER / '.env.example'))} .env keys agree"


class Runtime:
    """An agent runtime: claims with a long-poll, writes with the lease's fencing token."""

    def __init__(self, client, token, worker):
        self.c, self.token, self.worker = client, token, worker

    def claim(self, rid, kind, within=60.0):
        end = time.monotonic() + within
        while time.monotonic() < end:
            r = self.c.request("POST", "/v1/runtime/claims", self.token,
                               {"worker_id": self.worker, "max": 1, "wait_seconds": 5}, key=new_key())
            for claim in expect(r, (200,), "claim")["claims"]:
                if claim["run"]["id"] == rid and claim["kind"] == kind:
                    return claim
                raise Failed(f"claimed another run than {rid}: {claim['run']['id']} ({claim['kind']})")
        raise Failed(f"no {kind} claim of {rid} within {within:.0f}s")

    def write(self, rid, what, body):
        r = self.c.request("POST", f"/v1/runs/{rid}/{what}", self.token, body, key=new_key())
        return expect(r, (200,), what)


def create_run(c, tokens, title, sandbox):
    s = expect(c.request("POST", "/v1/sessions", tokens["frontend"], {"title": title}, key=new_key()),
               (201,), "create session")
    body = {"resolved_spec_hash": H, "input": {"title": title}}
    if sandbox:
        body["sandbox_spec"] = sandbox_spec()
    run = expect(c.request("POST", f"/v1/sessions/{s['id']}/runs", tokens["runtime"], body, key=new_key()),
                 (201,), "create run")
    return s["id"], run["id"]


def snapshot(c, token, sid, etag=None, wait=0):
    path = f"/v1/sessions/{sid}/snapshot" + (f"?wait_seconds={wait}" if wait else "")
    r = c.request("GET", path, token, headers={"if-none-match": etag} if etag else None, timeout=wait + 10)
    if r.status == 304:
        return etag, None
    return r.headers.get("etag"), expect(r, (200,), "snapshot")


def wait_snapshot(c, token, sid, cond, within=60.0):
    """Long-polls the snapshot until `cond(snapshot)` holds; returns it."""
    end = time.monotonic() + within
    etag, snap = snapshot(c, token, sid)
    while not cond(snap):
        if time.monotonic() > end:
            raise Failed(f"snapshot of {sid} never satisfied the condition: {json.dumps(snap)[:500]}")
        new_etag, got = snapshot(c, token, sid, etag, wait=5)
        if got is not None:
            etag, snap = new_etag, got
    return etag, snap


def sandbox_exec(stack, sandbox, argv):
    p = stack.provider
    conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=30)
    try:
        # Exec is authorized by the sandbox's grant alone.
        body = json.dumps({"argv": argv, "timeout_seconds": 10})
        conn.request("POST", f"/v3/sandboxes/{sandbox['ref']['sandbox_id']}/exec", body=body,
                     headers={"authorization": f"Bearer {sandbox['grant']}", "content-type": "application/json"})
        res = conn.getresponse()
        data = res.read()
        if res.status != 200:
            raise Failed(f"exec {argv}: {res.status} {data[:300]!r}")
        return json.loads(data)
    finally:
        conn.close()


def check_cycle(stack):
    """Through nginx: session → run (sandboxed) → claim → suspend with an approval → the
    frontend sees it in the snapshot and the inbox → reply → resume claim → resumed → complete."""
    t = stack.tokens
    c = Client(stack.nginx.port, "nginx")
    rt = Runtime(c, t["runtime"], "topology-cycle")
    sid, rid = create_run(c, t, "topology cycle", sandbox=True)
    claim = rt.claim(rid, "start")
    token = claim["lease"]["fencing_token"]
    if not claim.get("sandbox"):
        raise Failed(f"the start claim carries no sandbox: {claim}")
    marker = f"marker-{new_key()}"
    out = sandbox_exec(stack, claim["sandbox"], ["sh", "-c", f"echo {marker} > notes.txt"])
    if out.get("exit_code") != 0:
        raise Failed(f"exec in the sandbox failed: {out}")
    rt.write(rid, "suspend", suspend_body(token, "cycle"))
    _, snap = wait_snapshot(c, t["frontend"], sid, lambda s: s["pending_interactions"])
    iid = snap["pending_interactions"][0]["id"]
    status = snap["runs"][0]["status"]
    inbox = expect(c.request("GET", "/v1/interactions?status=pending", t["frontend"]), (200,), "inbox")
    if not any(i["interaction"]["id"] == iid and i["session_id"] == sid for i in inbox["interactions"]):
        raise Failed(f"interaction {iid} is not in the inbox: {inbox}")
    expect(c.request("POST", f"/v1/sessions/{sid}/interactions/{iid}/reply", t["frontend"],
                     {"decision": "approve"}, key=new_key()), (200,), "reply")
    claim = rt.claim(rid, "resume")
    token = claim["lease"]["fencing_token"]
    if not claim.get("checkpoint") or not claim.get("sandbox"):
        raise Failed(f"the resume claim lacks its checkpoint or sandbox: {claim}")
    rt.write(rid, "resumed", resumed_body(token))
    out = sandbox_exec(stack, claim["sandbox"], ["cat", "notes.txt"])
    if out.get("stdout", "").strip() != marker:
        raise Failed(f"the restored sandbox lost notes.txt: {out}")
    rt.write(rid, "complete", {"fencing_token": token, "output": {"ok": True}})
    wait_snapshot(c, t["frontend"], sid, lambda s: s["runs"][0]["status"] == "completed" and not s["pending_interactions"])
    return f"run {rid}: {status} with the approval pending, restored with its files, completed"


def long_polls_waiting(stack, name):
    r = Client(stack.ports[name], name).request("GET", "/metrics", stack.tokens["metrics"])
    expect(r, (200,), "metrics")
    m = re.search(rb"^sagents_long_polls_waiting (\d+)", r.body, re.M)
    return int(m.group(1)) if m else 0


def check_wake(stack, samples=3, limit=1.0):
    """A snapshot long-poll held on replica A wakes within `limit` of a reply sent to B."""
    t = stack.tokens
    a, b = Client(stack.ports["a"], "a"), Client(stack.ports["b"], "b")
    lats = []
    for n in range(samples):
        sid, rid = create_run(b, t, f"topology wake {n}", sandbox=False)
        rt = Runtime(b, t["runtime"], f"topology-wake-{n}")
        claim = rt.claim(rid, "start")
        rt.write(rid, "suspend", suspend_body(claim["lease"]["fencing_token"], f"wake {n}"))
        etag, snap = wait_snapshot(a, t["frontend"], sid, lambda s: s["pending_interactions"])
        iid = snap["pending_interactions"][0]["id"]
        before = long_polls_waiting(stack, "a")
        got = {}

        def hold():
            r = a.request("GET", f"/v1/sessions/{sid}/snapshot?wait_seconds=30", t["frontend"],
                          headers={"if-none-match": etag}, timeout=40)
            got["at"], got["resp"] = time.monotonic(), r

        th = threading.Thread(target=hold, daemon=True)
        th.start()
        end = time.monotonic() + 10
        while long_polls_waiting(stack, "a") <= before:
            if time.monotonic() > end or "resp" in got:
                raise Failed(f"the long-poll on A was not held: {got.get('resp')!r}")
            time.sleep(0.01)
        sent = time.monotonic()
        r = b.request("POST", f"/v1/sessions/{sid}/interactions/{iid}/reply", t["frontend"],
                      {"decision": "approve"}, key=new_key())
        answered = time.monotonic()
        expect(r, (200,), "reply on B")
        th.join(35)
        if "resp" not in got:
            raise Failed("the long-poll on A never returned")
        resp = got["resp"]
        if resp.status != 200 or any(p["id"] == iid for p in resp.json()["pending_interactions"]):
            raise Failed(f"the long-poll on A woke without the reply: {resp!r}")
        lat = got["at"] - sent
        lats.append(lat)
        log(f"wake {n + 1}/{samples}: A woke {lat * 1000:.0f} ms after the reply was sent to B "
            f"({(got['at'] - answered) * 1000:+.0f} ms after B answered it)")
        token = rt.claim(rid, "resume")["lease"]["fencing_token"]
        rt.write(rid, "resumed", resumed_body(token))
        rt.write(rid, "complete", {"fencing_token": token, "output": {"ok": True}})
    if max(lats) > limit:
        raise Failed(f"wake latency {max(lats) * 1000:.0f} ms is above {limit * 1000:.0f} ms")
    return f"wake latency max {max(lats) * 1000:.0f} ms over {samples} (limit {limit * 1000:.0f} ms)"
