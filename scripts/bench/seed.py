"""Seeds a running service for the HTTP benchmark.

usage: seed.py BASE_URL FRONTEND_TOKEN RUNTIME_TOKEN SESSIONS OUT_DIR

Creates SESSIONS sessions, each with one run suspended on a pending approval, and writes
  OUT_DIR/snapshot_path  the snapshot path of the first session and its ETag
  OUT_DIR/reply_paths    one reply path per pending interaction
"""
import http.client
import json
import sys
import threading
from urllib.parse import urlparse

HASH = "sha256:" + "ab" * 32


class Client:
    def __init__(self, base):
        u = urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port)

    def call(self, method, path, token, body=None):
        headers = {"authorization": f"Bearer {token}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["content-type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        r = self.conn.getresponse()
        raw = r.read()
        if r.status >= 300:
            raise SystemExit(f"{method} {path} -> {r.status} {raw[:300]!r}")
        return json.loads(raw) if raw else None, r


def seed(base, front, runtime, count, out, lock):
    c = Client(base)
    for _ in range(count):
        s, _ = c.call("POST", "/v1/sessions", front, {"title": "bench", "metadata": {"k": "v"}})
        sid = s["id"]
        c.call("POST", f"/v1/sessions/{sid}/runs", runtime, {"resolved_spec_hash": HASH, "input": {"q": 1}})
        # Seeders race for the oldest queued run; one claim per created run always finds one.
        claims = {"claims": []}
        while not claims["claims"]:
            claims, _ = c.call("POST", "/v1/runtime/claims", runtime, {"worker_id": "bench", "max": 1, "wait_seconds": 1})
        claim = claims["claims"][0]
        run = claim["run"]
        c.call("POST", f"/v1/runs/{run['id']}/suspend", runtime, {
            "fencing_token": claim["lease"]["fencing_token"],
            "reason": "approval_required",
            "checkpoint": {"codec_version": "v1", "sequence": 1, "state": {"step": 3}, "resolved_spec_hash": HASH},
            "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                            "payload": {"command": "rm -rf build/"}},
        })
        snap, _ = c.call("GET", f"/v1/sessions/{run['session_id']}/snapshot", front)
        with lock:
            for p in snap["pending_interactions"]:
                out.append((run["session_id"], p["id"], snap["session"]["revision"]))


def main():
    base, front, runtime, n, out_dir = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    threads, out, lock = 4, [], threading.Lock()
    ts = [threading.Thread(target=seed, args=(base, front, runtime, n // threads + (i < n % threads), out, lock))
          for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    sid, _, rev = out[0]
    with open(f"{out_dir}/snapshot_path", "w") as f:
        f.write(f"/v1/sessions/{sid}/snapshot\n\"{rev}\"\n")
    with open(f"{out_dir}/reply_paths", "w") as f:
        for sid, iid, _ in out:
            f.write(f"/v1/sessions/{sid}/interactions/{iid}/reply\n")
    print(f"seeded {len(out)} pending interactions", file=sys.stderr)


if __name__ == "__main__":
    main()
