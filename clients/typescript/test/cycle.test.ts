// A full approval cycle through the typed client against a live service:
// session → run → claim → suspend with an approval → inbox → reply → resume claim →
// resumed → complete. SAGENTS_URL, FRONT (frontend token) and RUNTIME (runtime token).
import assert from "node:assert/strict";
import { test } from "node:test";

import { createSagentsClient, expectOk, SagentsError } from "../src/index.js";

const baseUrl = process.env.SAGENTS_URL ?? "";
const front = createSagentsClient({ baseUrl, token: process.env.FRONT ?? "" });
const runtime = createSagentsClient({ baseUrl, token: process.env.RUNTIME ?? "" });
const specHash = `sha256:${"c".repeat(64)}`;

test("a run waits for a human and goes on once approved", async () => {
  assert.ok(baseUrl, "SAGENTS_URL must be set");
  const session = await expectOk(front.POST("/v1/sessions", { body: { title: "typed client" } }));
  const run = await expectOk(
    runtime.POST("/v1/sessions/{session_id}/runs", {
      params: { path: { session_id: session.id } },
      body: { resolved_spec_hash: specHash, input: { task: "deploy" } },
    }),
  );

  const first = await expectOk(
    runtime.POST("/v1/runtime/claims", { body: { worker_id: "ts-client", wait_seconds: 5 } }),
  );
  const claim = first.claims.find((c) => c.run.id === run.id);
  assert.ok(claim, "the new run is claimed");
  assert.equal(claim.kind, "start");

  const suspended = await expectOk(
    runtime.POST("/v1/runs/{run_id}/suspend", {
      params: { path: { run_id: run.id } },
      body: {
        fencing_token: claim.lease.fencing_token,
        reason: "approval_required",
        checkpoint: { codec_version: "v1", sequence: 1, state: { step: 1 }, resolved_spec_hash: specHash },
        interaction: {
          interaction_type: "approval",
          allowed_decisions: ["approve", "deny"],
          payload: { command: "deploy production" },
        },
      },
    }),
  );
  assert.equal(suspended.state, "suspended");

  const inbox = await expectOk(front.GET("/v1/interactions", { params: { query: { limit: 100 } } }));
  const item = inbox.interactions.find((i) => i.session_id === session.id);
  assert.ok(item, "the interaction is in the frontend's inbox");
  assert.deepEqual(item.interaction.allowed_decisions, ["approve", "deny"]);

  // A decision that is not allowed is a 4xx problem the client surfaces as a typed error.
  const refused = await front.POST("/v1/sessions/{session_id}/interactions/{interaction_id}/reply", {
    params: { path: { session_id: session.id, interaction_id: item.interaction.id } },
    body: { decision: "maybe" },
  });
  assert.equal(refused.response.status, 422);
  assert.ok(refused.error && typeof refused.error.code === "string");

  const key = crypto.randomUUID();
  const reply = () =>
    expectOk(
      front.POST("/v1/sessions/{session_id}/interactions/{interaction_id}/reply", {
        params: {
          path: { session_id: session.id, interaction_id: item.interaction.id },
          header: { "Idempotency-Key": key },
        },
        body: { decision: "approve" },
      }),
    );
  const answered = await reply();
  assert.deepEqual(await reply(), answered, "a retried reply is answered once");

  const again = await expectOk(
    runtime.POST("/v1/runtime/claims", { body: { worker_id: "ts-client", wait_seconds: 5 } }),
  );
  const resume = again.claims.find((c) => c.run.id === run.id);
  assert.ok(resume, "the approved run is offered again");
  assert.equal(resume.kind, "resume");
  assert.deepEqual(resume.checkpoint?.state, { step: 1 });

  await expectOk(
    runtime.POST("/v1/runs/{run_id}/resumed", {
      params: { path: { run_id: run.id } },
      body: { fencing_token: resume.lease.fencing_token, resolved_spec_hash: specHash },
    }),
  );
  await expectOk(
    runtime.POST("/v1/runs/{run_id}/complete", {
      params: { path: { run_id: run.id } },
      body: { fencing_token: resume.lease.fencing_token, output: { ok: true } },
    }),
  );

  const snapshot = await expectOk(
    front.GET("/v1/sessions/{session_id}/snapshot", { params: { path: { session_id: session.id } } }),
  );
  assert.equal(snapshot.pending_interactions.length, 0);
  assert.deepEqual(
    snapshot.runs.map((r) => r.status),
    ["completed"],
  );
});

test("a wrong token is a 401 problem", async () => {
  const stranger = createSagentsClient({ baseUrl, token: "not-a-token" });
  await assert.rejects(expectOk(stranger.GET("/v1/sessions")), (e: unknown) => {
    assert.ok(e instanceof SagentsError);
    assert.equal(e.status, 401);
    assert.equal(e.problem?.code, "auth.unauthorized");
    return true;
  });
});
