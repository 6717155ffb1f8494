"""A full approval cycle against the SAgents lifecycle service with the typed Python client.

A runtime starts a run and suspends it for a human's approval with a deadline that denies on
its own; the approver finds it in the inbox and approves with a comment, bound to the payload
shown; the runtime is offered the run again with its checkpoint, resumes and completes it; the
decision is in the tenant's audit chain.

    pip install clients/python
    SAGENTS_URL=http://127.0.0.1:8080 FRONT=<frontend token> RUNTIME=<runtime token> \\
        python3 examples/python/approval_cycle.py
"""

import os
import sys

from sagents_api import AuthenticatedClient
from sagents_api.api.audit import list_audit
from sagents_api.api.interactions import list_inbox, reply
from sagents_api.api.runs import complete_run, confirm_resumed, create_run, suspend_run
from sagents_api.api.runtime import claim_runs
from sagents_api.api.sessions import create_session, get_snapshot
from sagents_api.models import (
    ClaimRequest,
    CompleteRun,
    CompleteRunOutput,
    ConfirmResumed,
    CreateRun,
    CreateRunInput,
    CreateSession,
    InteractionType,
    NewCheckpoint,
    NewCheckpointState,
    NewInteraction,
    NewInteractionPayload,
    OnExpiryDecide,
    OnExpiryDecideAction,
    ReplyInteraction,
    SuspendRun,
    SuspensionReason,
)
from sagents_client import SagentsError, connect, ok

SPEC_HASH = "sha256:" + "e" * 64


def claim(runtime: AuthenticatedClient, run_id: str):
    offered = ok(claim_runs.sync_detailed(
        client=runtime, body=ClaimRequest(worker_id="python-example", wait_seconds=5)))
    for c in offered.claims:
        if c.run.id == run_id:
            return c
    sys.exit(f"run {run_id} was not offered: {offered}")


def main() -> None:
    base = os.environ["SAGENTS_URL"]
    front, runtime = connect(base, os.environ["FRONT"]), connect(base, os.environ["RUNTIME"])

    session = ok(create_session.sync_detailed(
        client=front, body=CreateSession(title="python example")))
    run = ok(create_run.sync_detailed(session.id, client=runtime, body=CreateRun(
        resolved_spec_hash=SPEC_HASH, input_=CreateRunInput.from_dict({"task": "deploy"}))))
    started = claim(runtime, run.id)
    print(f"session {session.id}, run {run.id} claimed ({started.kind})")

    ok(suspend_run.sync_detailed(run.id, client=runtime, body=SuspendRun(
        fencing_token=started.lease.fencing_token,
        reason=SuspensionReason.APPROVAL_REQUIRED,
        checkpoint=NewCheckpoint(codec_version="v1", sequence=1,
                                 state=NewCheckpointState.from_dict({"step": 1}),
                                 resolved_spec_hash=SPEC_HASH),
        interaction=NewInteraction(
            interaction_type=InteractionType.APPROVAL,
            allowed_decisions=["approve", "deny"],
            payload=NewInteractionPayload.from_dict({"command": "deploy production"}),
            expires_in_seconds=3600,
            on_expiry=OnExpiryDecide(action=OnExpiryDecideAction.DECIDE, decision="deny")),
    )))

    inbox = ok(list_inbox.sync_detailed(client=front, limit=100))
    item = next(i for i in inbox.interactions if i.session_id == session.id)
    interaction = item.interaction
    print(f"waiting for a human until {interaction.expires_at} "
          f"(then {interaction.on_expiry.decision}): {interaction.payload.to_dict()}")

    try:
        ok(reply.sync_detailed(session.id, interaction.id, client=front,
                               body=ReplyInteraction(decision="maybe")))
        sys.exit("a decision that is not allowed was accepted")
    except SagentsError as refused:
        assert refused.status == 422 and refused.code == "request.invalid", refused
    answer = ok(reply.sync_detailed(session.id, interaction.id, client=front, body=ReplyInteraction(
        decision="approve", comment="checked the target",
        payload_sha256=interaction.payload_sha256)))
    print(f"approved; the run is {answer.run_status}")

    resumed = claim(runtime, run.id)
    assert resumed.kind == "resume", resumed
    assert resumed.checkpoint.state.to_dict() == {"step": 1}, resumed
    token = resumed.lease.fencing_token
    ok(confirm_resumed.sync_detailed(run.id, client=runtime, body=ConfirmResumed(
        fencing_token=token, resolved_spec_hash=SPEC_HASH)))
    ok(complete_run.sync_detailed(run.id, client=runtime, body=CompleteRun(
        fencing_token=token, output=CompleteRunOutput.from_dict({"ok": True}))))

    snapshot = ok(get_snapshot.sync_detailed(session.id, client=front))
    statuses = [str(r.status) for r in snapshot.runs]
    assert statuses == ["completed"] and not snapshot.pending_interactions, snapshot
    print(f"completed: {statuses}")

    chain = ok(list_audit.sync_detailed(client=front, limit=1000))
    decided = [r for r in chain.records if r.subject == interaction.id]
    assert [r.kind for r in decided] == ["interaction.resolved"], chain
    assert decided[0].data.to_dict()["comment"] == "checked the target", decided
    print(f"audited: record {decided[0].sequence}, hash {decided[0].hash_[:12]}…")


if __name__ == "__main__":
    main()
