'use strict';

const TOKEN_KEY = 'sagents.frontendToken';
const WAIT_SECONDS = 25;

const $ = (id) => document.getElementById(id);
const state = { token: null, etag: null, items: [], more: false, selected: null, poll: null };

function showError(message, source) {
  const el = $('error');
  el.textContent = message;
  el.hidden = !message;
  el.dataset.source = source || '';
}

function problemText(status, body) {
  const detail = body && typeof body.detail === 'string' ? ' (' + body.detail + ')' : '';
  switch (status) {
    case 401: return 'This token was not accepted. Sign in again with a frontend token.';
    case 403: return 'This token may not do that: a frontend token is needed' + detail + '.';
    case 404: return 'This interaction or its session no longer exists' + detail + '.';
    case 409: return 'This interaction can no longer take that reply: it was answered, expired or cancelled' + detail + '.';
    case 422: return 'The service refused the request' + detail + '.';
    default: return 'The service answered ' + status + detail + '.';
  }
}

async function readProblem(res) {
  try { return await res.json(); } catch (_) { return null; }
}

function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

function signIn(token) {
  state.token = token;
  state.etag = null;
  state.items = [];
  state.selected = null;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('sign-in').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  render();
  startPolling();
}

function signOut(message) {
  if (state.poll) state.poll.abort();
  state.poll = null;
  state.token = null;
  state.etag = null;
  state.items = [];
  state.selected = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
  $('token').value = '';
  showError(message || '');
  $('token').focus();
}

function startPolling() {
  if (state.poll) state.poll.abort();
  const controller = new AbortController();
  state.poll = controller;
  pollLoop(controller).catch(() => {});
}

async function pollLoop(controller) {
  while (!controller.signal.aborted) {
    const headers = { authorization: 'Bearer ' + state.token };
    let url = '/v1/interactions?status=pending&limit=100';
    if (state.etag) {
      headers['if-none-match'] = state.etag;
      url += '&wait_seconds=' + WAIT_SECONDS;
    }
    let res;
    try {
      res = await fetch(url, { headers, cache: 'no-store', signal: controller.signal });
    } catch (e) {
      if (controller.signal.aborted) return;
      showError('The service cannot be reached; retrying.');
      await pause(2000, controller.signal);
      continue;
    }
    if (res.status === 304) continue;
    if (res.status === 401) { signOut(problemText(401)); return; }
    if (!res.ok) {
      showError(problemText(res.status, await readProblem(res)));
      await pause(2000, controller.signal);
      continue;
    }
    const page = await res.json();
    if (controller.signal.aborted) return;
    state.etag = res.headers.get('etag');
    state.items = page.interactions || [];
    state.more = Boolean(page.next_cursor);
    if ($('error').dataset.source !== 'reply') showError('');
    render();
  }
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

function render() {
  const list = $('inbox');
  const items = state.items;
  $('count').textContent = '(' + items.length + (state.more ? '+' : '') + ')';
  $('empty').hidden = items.length > 0;
  const focusedId = document.activeElement && document.activeElement.dataset.interaction;
  list.replaceChildren();
  for (const item of items) {
    const it = item.interaction;
    const li = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.dataset.interaction = it.id;
    button.setAttribute('aria-current', String(state.selected === it.id));
    const title = document.createElement('span');
    title.textContent = it.interaction_type + ': ' + summary(it.payload);
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = item.session_id + ' · ' + new Date(it.requested_at).toLocaleString();
    button.append(title, meta);
    button.addEventListener('click', () => select(it.id));
    li.append(button);
    list.append(li);
    if (focusedId === it.id) button.focus();
  }
  renderDetail();
}

function summary(payload) {
  const text = JSON.stringify(payload);
  return text.length > 80 ? text.slice(0, 79) + '…' : text;
}

function select(id) {
  state.selected = id;
  $('status').textContent = '';
  showError('');
  render();
  const first = $('decisions').querySelector('button');
  if (first) first.focus();
}

/** The deadline and what it does if nobody answers first. */
function deadlineText(it) {
  if (!it.expires_at) return 'none';
  const at = new Date(it.expires_at).toLocaleString();
  const policy = it.on_expiry || { action: 'fail' };
  if (policy.action === 'decide') return `${at}, then answered “${policy.decision}” automatically`;
  if (policy.action === 'cancel') return `${at}, then the run is cancelled`;
  return `${at}, then the run fails`;
}

function renderDetail() {
  const item = state.items.find((i) => i.interaction.id === state.selected);
  const detail = $('detail');
  if (!item) {
    detail.hidden = true;
    state.selected = null;
    return;
  }
  const it = item.interaction;
  detail.hidden = false;
  $('d-kind').textContent = it.interaction_type;
  $('d-session').textContent = item.session_id;
  $('d-run').textContent = it.run_id;
  $('d-requested').textContent = new Date(it.requested_at).toLocaleString();
  $('d-deadline').textContent = deadlineText(it);
  $('d-payload').textContent = JSON.stringify(it.payload, null, 2);
  const box = $('decisions');
  if (box.dataset.interaction === it.id && box.childElementCount === it.allowed_decisions.length) return;
  if (box.dataset.interaction !== it.id) $('comment').value = '';
  box.dataset.interaction = it.id;
  box.replaceChildren();
  for (const decision of it.allowed_decisions) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = decision;
    b.dataset.decision = decision;
    b.addEventListener('click', () => reply(item, decision, b));
    box.append(b);
  }
}

async function reply(item, decision, button) {
  const it = item.interaction;
  const buttons = $('decisions').querySelectorAll('button');
  buttons.forEach((b) => { b.disabled = true; });
  const comment = $('comment').value.trim();
  $('status').textContent = 'Sending ' + decision + '…';
  let res;
  try {
    res = await fetch('/v1/sessions/' + encodeURIComponent(item.session_id) + '/interactions/' +
      encodeURIComponent(it.id) + '/reply', {
      method: 'POST',
      headers: {
        authorization: 'Bearer ' + state.token,
        'content-type': 'application/json',
        'idempotency-key': uuid(),
      },
      // Bound to the payload on screen: a changed one is refused, not approved unseen.
      body: JSON.stringify(Object.assign(
        { decision, expected_revision: it.revision, payload_sha256: it.payload_sha256 },
        comment ? { comment } : {})),
    });
  } catch (e) {
    buttons.forEach((b) => { b.disabled = false; });
    $('status').textContent = '';
    showError('The service cannot be reached; the reply was not sent.', 'reply');
    return;
  }
  if (res.status === 401) { signOut(problemText(401)); return; }
  if (!res.ok) {
    buttons.forEach((b) => { b.disabled = false; });
    $('status').textContent = '';
    showError(problemText(res.status, await readProblem(res)), 'reply');
    return;
  }
  showError('');
  $('status').textContent = 'Sent: ' + decision + '.';
  button.blur();
}

document.addEventListener('DOMContentLoaded', () => {
  $('sign-in').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = $('token').value.trim();
    if (!token) return;
    showError('');
    signIn(token);
  });
  $('sign-out').addEventListener('click', () => signOut(''));
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) signIn(saved); else signOut('');
});
