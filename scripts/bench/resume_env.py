"""One service and one reference provider from a binary folder, as users run them: SQLite,
JSON logs at `info`, namespaced sandboxes; tokens, the provider registered, and a small HTTP
client with a keep-alive connection per thread."""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

TENANT = "acme"
PROVIDER_TOKEN = "bench-resume-provider-token-0123456789ab"
H = "sha256:" + "a" * 64
SPEC = {
    "spec_version": "sagents.sandbox-spec/v3",
    "provider_id": "local",
    "spec_hash": "sha256:" + "1" * 64,
    "policy_hash": "sha256:" + "2" * 64,
    "workspace_mode": "isolated",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpError(Exception):
    pass


class Client:
    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def conn(self):
        c = getattr(self.local, "conn", None)
        # The service closes a keep-alive connection idle for its idle timeout (75 s).
        if c is not None and time.monotonic() - self.local.used > 30:
            c.close()
            c = None
        if c is None:
            c = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self.local.used = time.monotonic()
        return c

    def call(self, method, path, token, body=None, ok=(200, 201)):
        h = {"authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["content-type"] = "application/json"
        c = self.conn()
        try:
            c.request(method, path, body=data, headers=h)
            res = c.getresponse()
            payload = res.read()
        except (OSError, http.client.HTTPException):
            c.close()
            self.local.conn = None
            raise
        if res.status not in ok:
            raise HttpError(f"{method} {path}: {res.status} {payload[:300]!r}")
        ctype = res.getheader("content-type", "")
        return json.loads(payload) if "json" in ctype else payload.decode()


class Env:
    """Started by `start`, stopped by `stop`; logs stay in `work`."""

    def __init__(self, bin_dir, work, workers=None):
        self.bin = Path(bin_dir)
        self.work = Path(work)
        self.workers = workers
        self.procs = []

    def _cli(self, *args):
        r = subprocess.run([str(self.bin / "sagents"), *args], env=self.env, check=True,
                           capture_output=True, text=True)
        return r.stdout.strip()

    def start(self):
        self.work.mkdir(parents=True, exist_ok=True)
        os.chmod(self.work, 0o711)  # the sandboxes' own users pass through to their folders
        self.env = dict(os.environ, SAGENTS_DATABASE_URL=f"sqlite://{self.work}/sagents.db")
        self.env.pop("RUST_LOG", None)
        (self.work / "grant.pub").write_text(self._cli("grant", "public-key") + "\n")
        token_file = self.work / "provider-token"
        token_file.write_text(PROVIDER_TOKEN)
        token_file.chmod(0o600)
        self.provider_root = self.work / "provider"
        pport, sport = free_port(), free_port()
        self.provider_url = f"http://127.0.0.1:{pport}"
        self._spawn("provider", [str(self.bin / "sagents-local-provider"), "serve",
                                 "--listen", f"127.0.0.1:{pport}", "--root", str(self.provider_root),
                                 "--token-file", str(token_file),
                                 "--grant-public-key-file", str(self.work / "grant.pub")])
        # Runtime leases outlive the setup of a 200-run burst (claimed, filled, then suspended).
        args = [str(self.bin / "sagents"), "serve", "--listen", f"127.0.0.1:{sport}",
                "--log-format", "json", "--lease-ttl-seconds", "900"]
        if self.workers:
            args += ["--workers", str(self.workers)]
        self._spawn("service", args)
        self.api = Client(sport)
        self.provider = Client(pport)
        self._ready()
        self.admin = self._cli("token", "create", "--role", "admin")
        self.front = self._cli("token", "create", "--role", "frontend", "--tenant", TENANT)
        self.runtime = self._cli("token", "create", "--role", "runtime", "--tenant", TENANT)
        self.api.call("POST", "/v1/admin/providers", self.admin,
                      {"provider_id": "local", "base_url": self.provider_url, "token": PROVIDER_TOKEN})
        return self

    def _spawn(self, name, argv):
        log = open(self.work / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.api.call("GET", "/readyz", "-")
                self.provider.call("GET", "/v3/capabilities", PROVIDER_TOKEN)
                return
            except (OSError, HttpError, http.client.HTTPException):
                time.sleep(0.1)
        raise RuntimeError(f"the service or the provider did not start: see {self.work}")

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        self._kill_leftover_sandboxes()

    def _kill_leftover_sandboxes(self):
        """Sandboxes a stopped provider left running (a run that never ended): bwrap processes
        whose command line names this environment's own folder."""
        mark = f"{self.provider_root}/".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if mark in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(int(pid), 9)
            except OSError:
                pass

    def log_lines(self):
        for line in (self.work / "service.log").read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    pass

    def sandbox_dir(self, sandbox_id):
        return self.provider_root / "sandboxes" / sandbox_id

    def long_polls_waiting(self):
        text = self.api.call("GET", "/metrics", self.admin)
        for line in text.splitlines():
            if line.startswith("sagents_long_polls_waiting "):
                return int(float(line.split()[1]))
        return 0

    # The run's lifecycle, as a frontend and a runtime drive it.

    def new_run(self, title):
        sid = self.api.call("POST", "/v1/sessions", self.front, {"title": title})["id"]
        rid = self.api.call("POST", f"/v1/sessions/{sid}/runs", self.runtime,
                            {"resolved_spec_hash": H, "sandbox_spec": SPEC, "input": {}})["id"]
        return sid, rid

    def claim(self, worker, max_=1, wait=20):
        body = {"worker_id": worker, "max": max_, "wait_seconds": wait}
        return self.api.call("POST", "/v1/runtime/claims", self.runtime, body)["claims"]

    def suspend(self, rid, token, seq):
        self.api.call("POST", f"/v1/runs/{rid}/suspend", self.runtime, {
            "fencing_token": token, "reason": "approval_required",
            "checkpoint": {"codec_version": "v1", "sequence": seq, "state": {"step": seq},
                           "resolved_spec_hash": H},
            "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                            "payload": {"command": "deploy"}}})

    def record_state(self, rid):
        return self.api.call("GET", f"/v1/admin/runs/{rid}/execution-resource", self.admin)["state"]

    def until_released(self, rids, limit=600, strict=True):
        deadline = time.monotonic() + limit
        left = set(rids)
        while left:
            left = {r for r in left if self.record_state(r) != "released"}
            if left and time.monotonic() > deadline:
                states = sorted(self.record_state(r) for r in left)
                msg = f"{len(left)} runs not released within {limit} s: {states}"
                if strict:
                    raise RuntimeError(msg)
                print(f"bench-resume: warning: {msg}", file=sys.stderr, flush=True)
                return
            if left:
                time.sleep(0.02)

    def pending_interaction(self, sid):
        snap = self.api.call("GET", f"/v1/sessions/{sid}/snapshot", self.front)
        return snap["pending_interactions"][0]["id"]

    def approve(self, sid, iid):
        self.api.call("POST", f"/v1/sessions/{sid}/interactions/{iid}/reply", self.front,
                      {"decision": "approve"})

    def finish(self, claim):
        rid, token = claim["run"]["id"], claim["lease"]["fencing_token"]
        self.api.call("POST", f"/v1/runs/{rid}/resumed", self.runtime, {
            "fencing_token": token, "resolved_spec_hash": H,
            "spec_hash": SPEC["spec_hash"], "policy_hash": SPEC["policy_hash"]})
        self.api.call("POST", f"/v1/runs/{rid}/complete", self.runtime,
                      {"fencing_token": token, "output": {}})

    def exec(self, claim, argv):
        sbx = claim["sandbox"]
        return self.provider.call("POST", f"/v3/sandboxes/{sbx['ref']['sandbox_id']}/exec",
                                  sbx["grant"], {"argv": argv, "timeout_seconds": 60})
