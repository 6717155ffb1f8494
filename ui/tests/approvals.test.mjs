// Drives the approvals page at $SAGENTS_URL/ui in headless Chromium: a runtime suspends a run
// for approval over HTTP; the page lists it, a click approves it, the run resumes, a second
// signed-in browser sees it leave, and a wrong token is refused with a clear message.
//   SAGENTS_URL=http://127.0.0.1:PORT FRONT=<frontend token> RUNTIME=<runtime token> \
//   node approvals.test.mjs      (SCREENSHOT_DIR: where to put screenshots, default /tmp)
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.SAGENTS_URL;
const front = process.env.FRONT;
const runtime = process.env.RUNTIME;
const shots = process.env.SCREENSHOT_DIR || tmpdir();
assert.ok(base && front && runtime, 'SAGENTS_URL, FRONT and RUNTIME must be set');

let keys = 0;
async function api(method, path, token, body, expected) {
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['idempotency-key'] = `ui-test-${process.pid}-${++keys}`;
  }
  const res = await fetch(base + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, expected, `${method} ${path}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A session whose run is suspended with a pending approval, as a runtime does it. */
async function waitingForApproval(command, deadline = {}) {
  const session = await api('POST', '/v1/sessions', front, {}, 201);
  const run = await api('POST', `/v1/sessions/${session.id}/runs`, runtime,
    { resolved_spec_hash: 'sha256:' + 'a'.repeat(64) }, 201);
  const claims = await api('POST', '/v1/runtime/claims', runtime, { worker_id: 'ui-test' }, 200);
  const claim = claims.claims.find((c) => c.run.id === run.id) ?? claims.claims[0];
  await api('POST', `/v1/runs/${run.id}/suspend`, runtime, {
    fencing_token: claim.lease.fencing_token,
    reason: 'approval_required',
    checkpoint: {
      codec_version: 'v1', sequence: 1, state: { step: 1 },
      resolved_spec_hash: 'sha256:' + 'a'.repeat(64),
    },
    interaction: {
      interaction_type: 'approval',
      allowed_decisions: ['approve', 'deny'],
      payload: { command, reason: '<b>not markup</b>' },
      ...deadline,
    },
  }, 200);
  const inbox = await api('GET', '/v1/interactions', front, undefined, 200);
  const item = inbox.interactions.find((i) => i.session_id === session.id);
  assert.ok(item, 'the interaction is in the inbox');
  return { sessionId: session.id, runId: run.id, interaction: item.interaction };
}

async function signIn(context, token, viewport) {
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const res = await page.goto(base + '/ui');
  assert.equal(res.status(), 200);
  assert.equal(res.headers()['content-type'], 'text/html; charset=utf-8');
  assert.match(res.headers()['content-security-policy'], /^default-src 'self'/);
  // Keyboard only: the label names the field, Enter submits.
  await page.getByLabel('Frontend token').fill(token);
  await page.getByLabel('Frontend token').press('Enter');
  return page;
}

const interactionButton = (page, id) => page.locator(`#inbox button[data-interaction="${id}"]`);

const errors = [];
// A launch without a persistent context runs on a fresh temporary profile.
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const checks = [];
const check = (name) => { checks.push(name); console.log(`ok ${checks.length} - ${name}`); };
try {
  const { sessionId, runId, interaction } = await waitingForApproval('rm -rf build', {
    expires_in_seconds: 3600, on_expiry: { action: 'decide', decision: 'deny' },
  });
  const other = await waitingForApproval('deploy production');

  // The approver, on a phone-sized screen.
  const approver = await browser.newContext();
  const page = await signIn(approver, front, { width: 375, height: 740 });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await interactionButton(page, interaction.id).waitFor();
  await interactionButton(page, other.interaction.id).waitFor();
  check('the inbox lists both pending interactions');

  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 375, `no horizontal scrolling at 375 px (scrollWidth ${width})`);
  check('the layout fits 375 px');

  // A second approver, signed in elsewhere, sees the same interaction.
  const watcher = await browser.newContext();
  const watching = await signIn(watcher, front);
  await interactionButton(watching, interaction.id).waitFor();
  check('a second signed-in browser lists it too');

  await interactionButton(page, interaction.id).focus();
  await page.keyboard.press('Enter');
  const payload = await page.locator('#d-payload').textContent();
  assert.equal(payload, JSON.stringify(interaction.payload, null, 2));
  assert.equal(await page.locator('#d-payload b').count(), 0, 'data never becomes markup');
  const decisions = await page.locator('#decisions button').allTextContents();
  assert.deepEqual(decisions, ['approve', 'deny']);
  const focused = await page.evaluate(() => document.activeElement.dataset.decision);
  assert.equal(focused, 'approve', 'selecting moves focus to the first decision');
  check('selecting shows the payload pretty-printed as text and one button per decision');
  const deadline = await page.locator('#d-deadline').textContent();
  assert.ok(deadline.endsWith('then answered “deny” automatically'), deadline);
  assert.equal(new Date(interaction.expires_at) - new Date(interaction.requested_at), 3600 * 1000);
  check('the deadline shows what it does if nobody answers');
  await page.screenshot({ path: join(shots, 'sagents-ui-selected.png'), fullPage: true });

  await page.locator('#comment').fill('checked the diff');
  await page.locator('#decisions button', { hasText: 'approve' }).click();
  await page.locator('#status', { hasText: 'Sent: approve.' }).waitFor();
  await interactionButton(page, interaction.id).waitFor({ state: 'detached' });
  check('approving removes it from the approver\'s inbox');
  await interactionButton(watching, interaction.id).waitFor({ state: 'detached' });
  await interactionButton(watching, other.interaction.id).waitFor();
  check('the second browser sees it leave and the other one stay');

  const snapshot = await api('GET', `/v1/sessions/${sessionId}/snapshot`, front, undefined, 200);
  assert.equal(snapshot.pending_interactions.length, 0, JSON.stringify(snapshot));
  const runs = JSON.stringify(snapshot);
  assert.ok(runs.includes(runId));
  const claims = await api('POST', '/v1/runtime/claims', runtime, { worker_id: 'ui-test' }, 200);
  const resumed = claims.claims.find((c) => c.run.id === runId);
  assert.ok(resumed, `the approved run is claimable again: ${JSON.stringify(claims)}`);
  check('the approved run is claimable again for resumption');
  const log = await api('GET', `/v1/sessions/${sessionId}/events`, front, undefined, 200);
  const resolved = JSON.stringify(log).includes('"comment":"checked the diff"');
  assert.ok(resolved, `the comment is kept with the answer: ${JSON.stringify(log)}`);
  check('the reply carries the comment, bound to the payload shown');

  // A page whose inbox stopped updating (its long-polls held) still shows the other
  // interaction; answered meanwhile elsewhere, the service refuses its reply with 409.
  const staleContext = await browser.newContext();
  const stalePage = await staleContext.newPage();
  await stalePage.route(/\/v1\/interactions\?/, (route) => {
    if (!route.request().headers()['if-none-match']) return route.continue();
  });
  await stalePage.goto(base + '/ui');
  await stalePage.getByLabel('Frontend token').fill(front);
  await stalePage.getByRole('button', { name: 'Sign in' }).click();
  await interactionButton(stalePage, other.interaction.id).click();
  await api('POST', `/v1/sessions/${other.sessionId}/interactions/${other.interaction.id}/reply`,
    front, { decision: 'deny' }, 200);
  await stalePage.locator('#decisions button', { hasText: 'approve' }).click();
  const conflict = stalePage.getByRole('alert');
  await conflict.waitFor();
  assert.match(await conflict.textContent(), /can no longer take that reply/);
  check('a reply to an interaction answered elsewhere shows the 409 message');
  await stalePage.screenshot({ path: join(shots, 'sagents-ui-conflict.png'), fullPage: true });
  await interactionButton(page, other.interaction.id).waitFor({ state: 'detached' });
  check('the live page drops the interaction answered elsewhere');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Frontend token').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  check('signing out forgets the token');

  const stranger = await browser.newContext();
  const refused = await signIn(stranger, 'not-a-token');
  const alert = refused.getByRole('alert');
  await alert.waitFor();
  assert.match(await alert.textContent(), /This token was not accepted/);
  await refused.getByLabel('Frontend token').waitFor();
  check('a wrong token is refused with "This token was not accepted"');
  await refused.screenshot({ path: join(shots, 'sagents-ui-refused.png'), fullPage: true });

  assert.deepEqual(errors, [], 'no script errors or CSP violations in the console');
  check('no console errors');
  console.log(`ui test: ${checks.length} checks passed`);
} finally {
  await browser.close();
}
