"""A full approval cycle against the SAgents lifecycle service with plain httpx.

A runtime starts a run, suspends it for a human's approval; the approver finds it in the
inbox and approves; the runtime is offered the run again with its checkpoint, resumes and
completes it.

    pip install httpx
    SAGENTS_URL=http://127.0.0.1:8080 FRONT=<frontend token> RUNTIME=<runtime token> \
        python3 examples/python/approval_cycle.py
"""

import os
import sys
import uuid

import httpx

SPEC_HASH = "sha256:" + "e" * 64


class Api:
    """One token's view of the service; every write carries a fresh Idempotency-Key."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )

    def get(self, path: str, **params) -> dict:
        return self._check(self.http.get(path, params=params))

    def post(self, path: str, body: dict, key: str | None = None) -> dict:
        headers = {"idempotency-key": key or str(uuid.uuid4())}
        return self._check(self.http.post(path, json=body, headers=headers))

    @staticmethod
    def _check(res: httpx.Response) -> dict:
        if res.is_error:
            problem = res.json()
            sys.exit(f"{res.request.method} {res.request.url.path}: {res.status_code} "
                     f"{problem.get('code')}: {problem.get('detail')}")
        return res.json()


def claim(runtime: Api, run_id: str) -> dict:
    offered = runtime.post("/v1/runtime/claims", {"worker_id": "python-example", "wait_seconds": 5})
    for c in offered["claims"]:
        if c["run"]["id"] == run_id:
            return c
    sys.exit(f"run {run_id} was not offered: {offered}")


def main() -> None:
    base = os.environ["SAGENTS_URL"]
    front, runtime = Api(base, os.environ["FRONT"]), Api(base, os.environ["RUNTIME"])

    session = front.post("/v1/sessions", {"title": "python example"})
    run = runtime.post(f"/v1/sessions/{session['id']}/runs",
                       {"resolved_spec_hash": SPEC_HASH, "input": {"task": "deploy"}})
    started = claim(runtime, run["id"])
    print(f"session {session['id']}, run {run['id']} claimed ({started['kind']})")

    runtime.post(f"/v1/runs/{run['id']}/suspend", {
        "fencing_token": started["lease"]["fencing_token"],
        "reason": "approval_required",
        "checkpoint": {"codec_version": "v1", "sequence": 1, "state": {"step": 1},
                       "resolved_spec_hash": SPEC_HASH},
        "interaction": {"interaction_type": "approval", "allowed_decisions": ["approve", "deny"],
                        "payload": {"command": "deploy production"}},
    })

    inbox = front.get("/v1/interactions", limit=100)
    item = next(i for i in inbox["interactions"] if i["session_id"] == session["id"])
    interaction = item["interaction"]
    print(f"waiting for a human: {interaction['payload']} {interaction['allowed_decisions']}")

    reply = front.post(
        f"/v1/sessions/{session['id']}/interactions/{interaction['id']}/reply",
        {"decision": "approve"},
    )
    print(f"approved; the run is {reply['run_status']}")

    resumed = claim(runtime, run["id"])
    assert resumed["kind"] == "resume", resumed
    assert resumed["checkpoint"]["state"] == {"step": 1}, resumed
    token = resumed["lease"]["fencing_token"]
    runtime.post(f"/v1/runs/{run['id']}/resumed",
                 {"fencing_token": token, "resolved_spec_hash": SPEC_HASH})
    runtime.post(f"/v1/runs/{run['id']}/complete", {"fencing_token": token, "output": {"ok": True}})

    snapshot = front.get(f"/v1/sessions/{session['id']}/snapshot")
    statuses = [r["status"] for r in snapshot["runs"]]
    assert statuses == ["completed"] and not snapshot["pending_interactions"], snapshot
    print(f"completed: {statuses}")


if __name__ == "__main__":
    main()
