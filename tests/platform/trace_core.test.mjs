// Black-box tests of the simulated BKN Trace Core: spawn the simulator on port 0,
// talk HTTP, kill it by PID. Contract: the Trace Core section of README.md in this
// directory.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parse } from './lib/json.mjs';

const SIM = fileURLToPath(new URL('./sim.mjs', import.meta.url));
const BASE = '/api/agent-observability/v1';
let child;
let base;

before(async () => {
  child = spawn(process.execPath, [SIM, '--port', '0', '--host', '127.0.0.1', '--ttl', '120'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('simulator did not start within 5 s')), 5000);
    child.stdout.on('data', (c) => {
      buf += c;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(buf.slice(0, nl));
      }
    });
    child.on('exit', (code) => reject(new Error(`simulator exited early (${code})`)));
  });
  base = JSON.parse(line).base;
});

after(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(child.pid, 'SIGTERM');
    await exited;
  }
});

const OWNER_A = {
  'x-account-id': 'u_demo',
  'x-account-type': 'user',
  'x-tenant-id': 'openbkn-local',
  'x-business-domain': 'bd_public',
  'x-bkn-application-principal-id': 'demo-client',
  'x-bkn-effective-subject-type': 'user',
  'x-bkn-effective-subject-id': 'u_demo',
  'x-bkn-auth-method': 'oauth',
};
// Same user through another OAuth client: a different owner tuple (application principal).
const OWNER_B = { ...OWNER_A, 'x-bkn-application-principal-id': 'other-client' };

async function call(method, path, { body, headers = {} } = {}) {
  const res = await fetch(base + path, { method, body, headers, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  let value;
  try {
    value = parse(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, text, json: value };
}

/** A Trace Core call as owner A (or `owner`); a non-string body is JSON-encoded. */
const core = (method, path, body, owner = OWNER_A) =>
  call(method, BASE + path, {
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...owner },
  });
const ctl = (method, path, body) => call(method, path, { body: body === undefined ? undefined : JSON.stringify(body) });

function assertErr(r, status, code, action) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, r.text);
  const e = r.json.error;
  assert.equal(e.code, code, r.text);
  assert.equal(typeof e.message, 'string');
  assert.equal(typeof e.retryable, 'boolean');
  assert.equal(typeof e.required_action, 'string');
  assert.equal(e.retry_after_ms, 0);
  if (action !== undefined) assert.equal(e.required_action, action);
  return e;
}

const envelope = (value) => {
  const inline = JSON.stringify(value);
  return { mode: 'inline', media_type: 'application/json', byte_length: Buffer.byteLength(inline), inline: value };
};

let keySeq = 0;
const uniq = (p) => `${p}-${process.pid}-${++keySeq}`;

async function newConversation(owner = OWNER_A) {
  const r = await core('POST', '/conversations:ensure-current', { external_conversation_key: uniq('mcp'), idempotency_key: uniq('k') }, owner);
  assert.equal(r.status, 201, r.text);
  return r.json.conversation_id;
}

async function startTurn({ owner = OWNER_A, cid, lease_seconds, agent = 'demo-agent' } = {}) {
  const conv = cid || (await newConversation(owner));
  const body = { idempotency_key: uniq('start'), request_hash: 'a'.repeat(64), agent_name: agent };
  if (lease_seconds) body.lease_seconds = lease_seconds;
  const r = await core('POST', `/conversations/${conv}/interactions`, body, owner);
  assert.equal(r.status, 201, r.text);
  return { cid: conv, interaction: r.json, iid: r.json.interaction_id };
}

function ensureBody(it, key, input = { q: 1 }, extra = {}) {
  return {
    operation_key: key, tool_name: 'search_schema', protocol: 'mcp', source_module: 'context-loader',
    input: envelope(input), required: true, lease_token: it.lease_token, lease_epoch: it.lease_epoch, ...extra,
  };
}
const ensureOp = (turn, key, input, extra, owner) =>
  core('POST', `/conversations/${turn.cid}/interactions/${turn.iid}/operations:ensure`, ensureBody(turn.interaction, key, input, extra), owner);

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
function finalBody(receiptId, extra = {}) {
  return {
    receipt_id: receiptId, evidence_durability: 'durable', retryable: false, request_id: 'req_abcdefgh01',
    trace_id: TRACE_ID, span_id: '00f067aa0ba902b7', observed_evidence_refs: ['evt_1'],
    business_refs: [{ ref_type: 'object_type', ref_id: 'object:kn_medical:ot_drug', version: 'v1' }],
    artifact_refs: null, partial_reasons: null, output: envelope({ ok: true }), ...extra,
  };
}

const sha = (s) => createHash('sha256').update(s).digest('hex');
function artifactBody(iid, type = 'result', content = 'The answer is 42.') {
  const contentHash = `sha256:${sha(JSON.stringify(content))}`;
  return {
    artifact_id: `art_${type}_${sha(`${iid}|${type}|${contentHash}`).slice(0, 32)}`,
    artifact_type: type, 'bkn.request.id': 'req_abcdefgh01', trace_id: TRACE_ID, interaction_id: iid,
    content_type: 'application/json', schema_version: '2.2.0', observed_at: new Date().toISOString(),
    content_hash: contentHash, content, 'bkn.tenant.id': 'openbkn-local', business_domain: 'bd_public',
    'bkn.account.id': 'u_demo', 'bkn.account.type': 'user', effective_subject_id: 'u_demo',
    application_principal_id: 'demo-client', initiator: 'account:u_demo', agent_or_app: 'demo-agent',
  };
}

test('registered as service trace_core', async () => {
  const r = await ctl('GET', '/_sim/health');
  assert.ok(r.json.services.includes('trace_core'));
});

test('health needs no identity; capture-policy is per owner and togglable', async () => {
  let r = await call('GET', `${BASE}/health`);
  assert.equal(r.status, 200);
  assert.deepEqual(r.json, { status: 'ok' });
  assertErr(await call('POST', `${BASE}/health`), 405, 'method_not_allowed');

  assertErr(await call('GET', `${BASE}/capture-policy`), 401, 'permission_denied', 'request_authorization');
  r = await core('GET', '/capture-policy');
  assert.equal(r.text, '{"capture":"enabled","ttl_s":30}');

  r = await ctl('POST', '/_sim/trace', { capture: 'disabled' });
  assert.equal(r.status, 200, r.text);
  assert.equal((await core('GET', '/capture-policy')).json.capture, 'disabled');
  await ctl('POST', '/_sim/trace', { capture: 'enabled', ttl_s: 5 });
  assert.deepEqual((await core('GET', '/capture-policy')).json, { capture: 'enabled', ttl_s: 5 });

  // A scoped override affects only that (tenant, business domain).
  await ctl('POST', '/_sim/trace', { capture: 'disabled', tenant_id: 'openbkn-local', business_domain: 'bd_other' });
  assert.equal((await core('GET', '/capture-policy')).json.capture, 'enabled');
  assert.equal((await core('GET', '/capture-policy', undefined, { ...OWNER_A, 'x-business-domain': 'bd_other' })).json.capture, 'disabled');

  assert.equal((await ctl('POST', '/_sim/trace', { capture: 'off' })).status, 400);
  assert.equal((await ctl('POST', '/_sim/trace', { capture: 'enabled', extra: 1 })).status, 400);
  assert.equal((await ctl('POST', '/_sim/trace', { tenant_id: 'x' })).status, 400);
  assert.equal((await ctl('GET', '/_sim/trace')).json.overrides.length, 1);

  await ctl('POST', '/_sim/reset');
  assert.equal((await core('GET', '/capture-policy')).text, '{"capture":"enabled","ttl_s":30}');
});

test('owner headers: every missing piece and anonymous -> 401 permission_denied', async () => {
  for (const h of Object.keys(OWNER_A)) {
    const owner = { ...OWNER_A };
    delete owner[h];
    const r = await core('POST', '/conversations:ensure-current', { external_conversation_key: 'k' }, owner);
    const e = assertErr(r, 401, 'permission_denied', 'request_authorization');
    assert.equal(e.retryable, false);
  }
  assertErr(await core('GET', '/capture-policy', undefined, { ...OWNER_A, 'x-account-type': 'anonymous' }), 401, 'permission_denied');
  assertErr(await core('GET', '/capture-policy', undefined, { ...OWNER_A, 'x-bkn-effective-subject-type': 'robot' }), 401, 'permission_denied');
  // The envelope shape, key order included.
  const r = await core('GET', '/capture-policy', undefined, {});
  assert.deepEqual(Object.keys(r.json), ['error']);
  assert.deepEqual(Object.keys(r.json.error), ['code', 'message', 'retryable', 'required_action', 'retry_after_ms']);
});

test('L1 ensure-current: idempotent per (owner, key); strict body', async () => {
  const key = uniq('mcp-host');
  const r1 = await core('POST', '/conversations:ensure-current', { external_conversation_key: key, idempotency_key: 'i1' });
  assert.equal(r1.status, 201, r1.text);
  const c = r1.json;
  assert.match(c.conversation_id, /^conv_[0-9a-f]{32}$/);
  assert.equal(c.external_conversation_key, key);
  assert.equal(c.status, 'active');
  assert.equal(c.generation, 1);
  assert.equal(c.business_context, 'managed');
  assert.equal(c.creation_auth_method, 'oauth');
  assert.deepEqual(c.owner, {
    tenant_id: 'openbkn-local', business_domain_id: 'bd_public', application_principal_id: 'demo-client',
    effective_subject_type: 'user', effective_subject_id: 'u_demo',
  });
  // The idempotency_key is ignored on this route: the slot is the identity.
  const r2 = await core('POST', '/conversations:ensure-current', { external_conversation_key: key, idempotency_key: 'i2' });
  assert.equal(r2.status, 201);
  assert.equal(r2.json.conversation_id, c.conversation_id);
  const r3 = await core('POST', '/conversations:ensure-current', { external_conversation_key: key }, OWNER_B);
  assert.equal(r3.status, 201);
  assert.notEqual(r3.json.conversation_id, c.conversation_id);

  const path = '/conversations:ensure-current';
  assertErr(await core('POST', path, { external_conversation_key: key, title: 'x' }), 400, 'conversation_required', 'bkn_start_interaction');
  assertErr(await core('POST', path, '[]'), 400, 'conversation_required');
  assertErr(await core('POST', path, ''), 400, 'conversation_required');
  assertErr(await core('POST', path, '{"external_conversation_key":"k"} {}'), 400, 'conversation_required');
  assertErr(await core('POST', path, {}), 400, 'conversation_required');
  assertErr(await core('GET', path), 405, 'method_not_allowed');
});

test('L2 start: idempotency, interaction_in_progress, agent_name rules, owner isolation', async () => {
  const cid = await newConversation();
  const path = `/conversations/${cid}/interactions`;
  const body = { idempotency_key: 'start-1', request_hash: 'h1', agent_name: 'agent-a' };
  const t0 = Date.now();
  const r1 = await core('POST', path, body);
  const t1 = Date.now();
  assert.equal(r1.status, 201, r1.text);
  const it = r1.json;
  assert.match(it.interaction_id, /^int_[0-9a-f]{32}$/);
  assert.match(it.lease_token, /^lease_[0-9a-f]{32}$/);
  assert.equal(it.conversation_id, cid);
  assert.equal(it.ordinal, 1);
  assert.equal(it.execution_status, 'active');
  assert.equal(it.evidence_status, 'not_applicable');
  assert.equal(it.lease_epoch, 1);
  // 5 min from when it was made, between our two readings (bracketed: no bound on the
  // round trip's speed; 1 s for the timestamp's rounding)
  const expires = Date.parse(it.lease_expires_at);
  assert.ok(expires >= t0 + 299000 && expires <= t1 + 301000, `default lease is 5 min: ${it.lease_expires_at} for a request made in [${t0}, ${t1}]`);

  // Same key + same hash: the original Interaction, 201.
  const r2 = await core('POST', path, body);
  assert.equal(r2.status, 201);
  assert.equal(r2.json.interaction_id, it.interaction_id);
  // Same key + different hash.
  assertErr(await core('POST', path, { ...body, request_hash: 'h2' }), 409, 'idempotency_conflict', 'use_new_idempotency_key');
  // agent_name is checked before the idempotency record.
  assertErr(await core('POST', path, { ...body, agent_name: 'agent-b' }), 409, 'agent_name_conflict', 'reuse_conversation_agent_name');
  // New key while one is active.
  const e = assertErr(await core('POST', path, { ...body, idempotency_key: 'start-2' }), 409, 'interaction_in_progress', 'bkn_finish_interaction');
  assert.equal(e.current_interaction_id, it.interaction_id);
  assert.equal(e.current_status, 'active');

  assertErr(await core('POST', path, { ...body, agent_name: '' }), 422, 'agent_name_invalid', 'fix_agent_name');
  assertErr(await core('POST', path, { ...body, agent_name: 'x'.repeat(129) }), 422, 'agent_name_invalid');
  assertErr(await core('POST', path, { ...body, title: 't' }), 400, 'interaction_required');
  assertErr(await core('POST', path, { request_hash: 'h1' }), 400, 'interaction_required');
  assertErr(await core('POST', path, { ...body, lease_seconds: 0 }), 400, 'interaction_required');
  assertErr(await core('POST', path, body, OWNER_B), 404, 'resource_not_disclosed', 'verify_scope_or_identifier');
  assertErr(await core('POST', `/conversations/conv_${'0'.repeat(32)}/interactions`, body), 404, 'resource_not_disclosed');

  // L3
  const g = await core('GET', `/interactions/${it.interaction_id}`);
  assert.equal(g.status, 200);
  assert.equal(g.json.interaction_id, it.interaction_id);
  assertErr(await core('GET', `/interactions/${it.interaction_id}`, undefined, OWNER_B), 404, 'resource_not_disclosed');
  assertErr(await core('GET', `/interactions/int_${'1'.repeat(32)}`), 404, 'resource_not_disclosed');
  assertErr(await core('POST', `/interactions/${it.interaction_id}`, {}), 405, 'method_not_allowed');
  const unknown = await core('GET', '/no-such-route');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error_code, 'Public.NotFound');
});

test('L4 operations:ensure: create, replay, conflicts, lease checks', async () => {
  const turn = await startTurn();
  const r1 = await ensureOp(turn, 'mcp:k1', { q: 1, big: 1 });
  assert.equal(r1.status, 201, r1.text);
  assert.deepEqual(Object.keys(r1.json), ['operation', 'receipt', 'created', 'execute']);
  const { operation: op, receipt: rc } = r1.json;
  assert.equal(r1.json.created, true);
  assert.equal(r1.json.execute, true);
  assert.match(op.operation_id, /^op_[0-9a-f]{32}$/);
  assert.match(rc.receipt_id, /^rcpt_[0-9a-f]{32}$/);
  assert.equal(op.attempt, 1);
  assert.equal(op.attempt_status, 'pending');
  assert.equal(rc.receipt_status, 'pending');
  assert.equal(rc.evidence_durability, 'pending');
  assert.equal(rc.schema_version, '3.0.0');
  assert.equal(rc.operation_id, op.operation_id);
  assert.equal(rc.required, true);

  // The interaction now assembles evidence and its lease was renewed.
  let g = await core('GET', `/interactions/${turn.iid}`);
  assert.equal(g.json.evidence_status, 'assembling');
  assert.ok(g.json.lease_version > turn.interaction.lease_version);

  // Replay with the same payload (key order does not matter): no second execution.
  const r2 = await ensureOp(turn, 'mcp:k1', { big: 1, q: 1 });
  assert.equal(r2.status, 201);
  assert.equal(r2.json.created, false);
  assert.equal(r2.json.execute, false);
  assert.equal(r2.json.operation.operation_id, op.operation_id);
  assert.equal(r2.json.receipt.receipt_id, rc.receipt_id);

  assertErr(await ensureOp(turn, 'mcp:k1', { q: 2 }), 409, 'idempotency_conflict', 'use_new_idempotency_key');
  assertErr(await ensureOp(turn, 'mcp:k1', { q: 1, big: 1 }, { tool_name: 'kn_search' }), 409, 'idempotency_conflict');
  assertErr(await ensureOp(turn, 'mcp:k1', { q: 1, big: 1 }, { causation_event_ids: ['evt_x'] }), 409, 'idempotency_conflict');
  assertErr(await ensureOp(turn, 'mcp:k1', { q: 1, big: 1 }, { parent_operation_id: op.operation_id }), 409, 'idempotency_conflict');

  // A child operation with a valid parent; an unknown parent is not disclosed.
  const child = await ensureOp(turn, 'mcp:k2', { q: 1 }, { parent_operation_id: op.operation_id, causation_event_ids: ['evt_b', 'evt_a', 'evt_b'] });
  assert.equal(child.status, 201, child.text);
  assert.equal(child.json.operation.parent_operation_id, op.operation_id);
  assert.deepEqual(child.json.operation.causation_event_ids, ['evt_a', 'evt_b']);
  assertErr(await ensureOp(turn, 'mcp:k3', { q: 1 }, { parent_operation_id: `op_${'0'.repeat(32)}` }), 404, 'resource_not_disclosed');

  // An omitted input never compares equal.
  const omitted = { mode: 'omitted', media_type: 'application/json', byte_length: 2000000, omitted_reason: 'payload_too_large' };
  assert.equal((await ensureOp(turn, 'mcp:big', null, { input: omitted })).status, 201);
  assertErr(await ensureOp(turn, 'mcp:big', null, { input: omitted }), 409, 'idempotency_conflict');

  // Lease and body checks.
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { lease_token: `lease_${'0'.repeat(32)}` }), 409, 'terminal_conflict', 'reuse_authoritative_interaction');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { lease_epoch: 2 }), 409, 'terminal_conflict');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { operation_key: '' }), 400, 'operation_required', 'ensure_operation');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { protocol: 'http' }), 400, 'operation_required');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { extra: 1 }), 400, 'operation_required');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, { input: { mode: 'inline', media_type: 'application/json', byte_length: 2 } }), 400, 'operation_required');
  assertErr(await ensureOp(turn, 'mcp:k4', {}, {}, OWNER_B), 404, 'resource_not_disclosed');
  const other = await startTurn();
  assertErr(await core('POST', `/conversations/${other.cid}/interactions/${turn.iid}/operations:ensure`, ensureBody(turn.interaction, 'mcp:k5')),
    404, 'resource_not_disclosed');

  // L6 reads.
  const go = await core('GET', `/operations/${op.operation_id}`);
  assert.equal(go.status, 200);
  assert.equal(go.json.operation_key, 'mcp:k1');
  const gr = await core('GET', `/receipts/${rc.receipt_id}`);
  assert.equal(gr.status, 200);
  assert.equal(gr.json.receipt_status, 'pending');
  assertErr(await core('GET', `/operations/${op.operation_id}`, undefined, OWNER_B), 404, 'resource_not_disclosed');
  assertErr(await core('GET', `/receipts/${rc.receipt_id}`, undefined, OWNER_B), 404, 'resource_not_disclosed');
});

test('L4: the 129th operation of an interaction is refused', async () => {
  const turn = await startTurn();
  for (let n = 0; n < 128; n++) {
    const r = await ensureOp(turn, `mcp:n${n}`, { n });
    assert.equal(r.status, 201, r.text);
  }
  const e = assertErr(await ensureOp(turn, 'mcp:n128', { n: 128 }), 400, 'operation_required');
  assert.match(e.message, /128/);
  // Replays of existing keys still work at the limit.
  assert.equal((await ensureOp(turn, 'mcp:n5', { n: 5 })).json.created, false);
});

test('L5 complete / fail: stored result, replay, conflicts, validation', async () => {
  const turn = await startTurn();
  const { operation: op, receipt: rc } = (await ensureOp(turn, 'mcp:f1', { q: 1 })).json;
  const url = (n, verb) => `/operations/${op.operation_id}/attempts/${n}:${verb}`;

  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { request_id: undefined })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { request_id: '' })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { trace_id: '0'.repeat(32) })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { trace_id: 'ABC' })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { output: undefined })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { extra: true })), 400, 'operation_required');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, {
    business_refs: [{ ref_type: 'object_type', ref_id: 'object:kn_medical:ot_drug:extra', version: 'v1' }],
  })), 400, 'operation_required');
  assertErr(await core('POST', url(2, 'complete'), finalBody(rc.receipt_id)), 409, 'idempotency_conflict');
  assertErr(await core('POST', url(1, 'complete'), finalBody(`rcpt_${'0'.repeat(32)}`)), 409, 'idempotency_conflict');
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id), OWNER_B), 404, 'resource_not_disclosed');

  const r1 = await core('POST', url(1, 'complete'), finalBody(rc.receipt_id));
  assert.equal(r1.status, 200, r1.text);
  assert.equal(r1.json.created, false);
  assert.equal(r1.json.execute, false);
  assert.equal(r1.json.receipt.receipt_status, 'completed');
  assert.equal(r1.json.receipt.evidence_durability, 'durable');
  assert.equal(r1.json.receipt.trace_id, TRACE_ID);
  assert.equal(r1.json.receipt.request_id, 'req_abcdefgh01');
  assert.deepEqual(r1.json.receipt.observed_evidence_refs, ['evt_1']);
  assert.deepEqual(r1.json.receipt.business_refs, [
    { ref_type: 'object_type', ref_id: 'object:kn_medical:ot_drug', business_domain_id: 'bd_public', version: 'v1' },
  ]);
  assert.deepEqual(r1.json.receipt.partial_reasons, []);
  assert.equal(r1.json.operation.attempt_status, 'completed');

  // Identical replay -> the stored result; a different payload -> conflict.
  const r2 = await core('POST', url(1, 'complete'), finalBody(rc.receipt_id));
  assert.equal(r2.status, 200);
  assert.equal(r2.text, r1.text);
  assertErr(await core('POST', url(1, 'complete'), finalBody(rc.receipt_id, { output: envelope({ ok: false }) })), 409, 'idempotency_conflict');
  assertErr(await core('POST', url(1, 'fail'), finalBody(rc.receipt_id, { output: undefined, error: envelope({ code: 'x' }) })), 409, 'idempotency_conflict');

  // ensure after a terminal receipt: no execution, the terminal receipt.
  const again = await ensureOp(turn, 'mcp:f1', { q: 1 });
  assert.equal(again.status, 201);
  assert.equal(again.json.created, false);
  assert.equal(again.json.execute, false);
  assert.equal(again.json.receipt.receipt_status, 'completed');
  assert.equal((await core('GET', `/receipts/${rc.receipt_id}`)).json.receipt_status, 'completed');

  // :fail with evidence failure: retryable kept, partial reason added; `output` is not a :fail field.
  const f = (await ensureOp(turn, 'mcp:f2', { q: 2 })).json;
  const furl = `/operations/${f.operation.operation_id}/attempts/1:fail`;
  assertErr(await core('POST', furl, finalBody(f.receipt.receipt_id)), 400, 'operation_required');
  const failBody = finalBody(f.receipt.receipt_id, {
    output: undefined, error: envelope({ code: 'downstream_error' }), evidence_durability: 'failed', retryable: true,
  });
  const fr = await core('POST', furl, failBody);
  assert.equal(fr.status, 200, fr.text);
  assert.equal(fr.json.receipt.receipt_status, 'failed');
  assert.equal(fr.json.operation.attempt_status, 'failed');
  assert.equal(fr.json.operation.retryable, true);
  assert.deepEqual(fr.json.receipt.partial_reasons, ['evidence_durability_failed']);

  // retryable is dropped unless durability failed too.
  const f3 = (await ensureOp(turn, 'mcp:f3', { q: 3 })).json;
  const fr3 = await core('POST', `/operations/${f3.operation.operation_id}/attempts/1:fail`,
    finalBody(f3.receipt.receipt_id, { output: undefined, error: envelope({ code: 'tool_error' }), retryable: true }));
  assert.equal(fr3.status, 200, fr3.text);
  assert.equal(fr3.json.operation.retryable, false);
});

test('E1 artifacts and L7 finish rules', async () => {
  const turn = await startTurn();
  const fin = (body, owner) => core('POST', `/interactions/${turn.iid}/finish`, body, owner);
  assertErr(await fin({ outcome: 'completed', idempotency_key: 'f1' }), 422, 'closure_manifest_invalid', 'fix_closure_manifest');
  assertErr(await fin({ outcome: 'completed', idempotency_key: 'f1', answer_artifact_ref: 'artifact:art_result_nope' }), 422, 'closure_manifest_invalid');
  assertErr(await fin({ outcome: 'abandoned', idempotency_key: 'f1' }), 422, 'interaction_required');
  assertErr(await fin({ outcome: 'failed' }), 400, 'interaction_required');
  assertErr(await fin({ outcome: 'failed', idempotency_key: 'f1', status: 'x' }), 400, 'interaction_required');
  assertErr(await fin({ outcome: 'failed', idempotency_key: 'f1' }, OWNER_B), 404, 'resource_not_disclosed');

  // The answer artifact: deterministic id, replay is 200 created:false.
  const art = artifactBody(turn.iid);
  const a1 = await core('POST', '/evidence/artifacts', art);
  assert.equal(a1.status, 201, a1.text);
  assert.equal(a1.json.created, true);
  assert.equal(a1.json.artifact_id, art.artifact_id);
  const a2 = await core('POST', '/evidence/artifacts', art);
  assert.equal(a2.status, 200);
  assert.equal(a2.json.created, false);
  assertErr(await core('POST', '/evidence/artifacts', { ...art, artifact_id: 'art_result_0' }), 400, 'invalid_evidence_artifact');
  assertErr(await core('POST', '/evidence/artifacts', { ...art, surprise: 1 }), 400, 'invalid_evidence_artifact');
  assertErr(await core('POST', '/evidence/artifacts', artifactBody(turn.iid, 'result', 'password: hunter2')), 400, 'invalid_evidence_artifact');
  assertErr(await core('POST', '/evidence/artifacts', art, OWNER_B), 404, 'resource_not_disclosed');
  assertErr(await core('POST', '/evidence/artifacts', { ...art, content: 'another answer' }), 409, 'idempotency_conflict');

  // An operation whose receipt completes durably -> evidence complete.
  const { operation: op, receipt: rc } = (await ensureOp(turn, 'mcp:e1', { q: 1 })).json;
  assert.equal((await core('POST', `/operations/${op.operation_id}/attempts/1:complete`, finalBody(rc.receipt_id))).status, 200);

  const body = { outcome: 'completed', idempotency_key: 'f1', answer_artifact_ref: `artifact:${art.artifact_id}` };
  const f1 = await fin(body);
  assert.equal(f1.status, 200, f1.text);
  assert.equal(f1.json.execution_status, 'completed');
  assert.equal(f1.json.evidence_status, 'complete');
  assert.ok(f1.json.terminal_at);
  assert.equal(f1.json.closure_manifest.answer_artifact_ref, body.answer_artifact_ref);
  assert.equal(f1.json.closure_manifest.completion_reason, 'completed');
  // Identical retry -> the stored Interaction; anything else -> terminal_conflict.
  const f2 = await fin(body);
  assert.equal(f2.status, 200);
  assert.equal(f2.text, f1.text);
  let e = assertErr(await fin({ ...body, idempotency_key: 'f2' }), 409, 'terminal_conflict', 'reuse_authoritative_interaction');
  assert.equal(e.current_status, 'completed');
  e = assertErr(await fin({ outcome: 'failed', idempotency_key: 'f1' }), 409, 'terminal_conflict');
  assert.equal(e.current_status, 'completed');
  // Operations on a finished interaction.
  e = assertErr(await ensureOp(turn, 'mcp:e2', { q: 2 }), 409, 'interaction_terminal', 'bkn_start_interaction');
  assert.equal(e.current_status, 'completed');

  // The conversation stays reusable: the next turn starts and cancels (stored as canceled).
  const next = await startTurn({ cid: turn.cid });
  assert.equal(next.interaction.ordinal, 2);
  const c = await core('POST', `/interactions/${next.iid}/finish`, { outcome: 'cancelled', idempotency_key: 'c1', reason: 'user left' });
  assert.equal(c.status, 200, c.text);
  assert.equal(c.json.execution_status, 'canceled');
  assert.equal(c.json.evidence_status, 'not_applicable');
  assert.equal(c.json.closure_manifest.completion_reason, 'user left');

  // A pending required receipt keeps evidence "assembling"; a failed durability makes it partial.
  const t3 = await startTurn({ cid: turn.cid });
  await ensureOp(t3, 'mcp:p1', { q: 1 });
  const h = await core('POST', `/interactions/${t3.iid}/finish`, { outcome: 'handed_off', idempotency_key: 'h1' });
  assert.equal(h.json.execution_status, 'handed_off');
  assert.equal(h.json.evidence_status, 'assembling');
  assert.ok(h.json.closure_manifest.assembler_deadline);
  // Late finalization re-evaluates.
  const st = (await ctl('GET', '/_sim/trace/state')).json;
  const late = st.operations.find((o) => o.interaction_id === t3.iid);
  const lr = await core('POST', `/operations/${late.operation_id}/attempts/1:complete`, finalBody(late.receipt_id, { evidence_durability: 'failed' }));
  assert.equal(lr.status, 200, lr.text);
  assert.equal((await core('GET', `/interactions/${t3.iid}`)).json.evidence_status, 'partial');
});

test('lease expiry abandons the interaction', async () => {
  const turn = await startTurn({ lease_seconds: 1 });
  const t0 = Date.now();
  assert.ok(Date.parse(turn.interaction.lease_expires_at) - t0 <= 1000);
  await new Promise((r) => setTimeout(r, 1100));
  const g = await core('GET', `/interactions/${turn.iid}`);
  assert.equal(g.json.execution_status, 'abandoned');
  assert.equal(g.json.closure_manifest.completion_reason, 'interaction_abandoned');
  let e = assertErr(await ensureOp(turn, 'mcp:late', { q: 1 }), 409, 'interaction_terminal');
  assert.equal(e.current_status, 'abandoned');
  e = assertErr(await core('POST', `/interactions/${turn.iid}/finish`, { outcome: 'failed', idempotency_key: 'x' }), 409, 'terminal_conflict');
  assert.equal(e.current_status, 'abandoned');
  assert.match(e.message, /lease has expired/);
  // The slot is free again.
  const next = await startTurn({ cid: turn.cid });
  assert.equal(next.interaction.execution_status, 'active');
});

test('lease renewal by operations:ensure keeps a short lease alive', async () => {
  const turn = await startTurn({ lease_seconds: 1 });
  await new Promise((r) => setTimeout(r, 600));
  assert.equal((await ensureOp(turn, 'mcp:r1', { q: 1 })).status, 201);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal((await core('GET', `/interactions/${turn.iid}`)).json.execution_status, 'active');
});

test('faults on trace_core: 5xx once, close once, latency; requests are recorded', async () => {
  await ctl('POST', '/_sim/reset');
  const since = (await ctl('GET', '/_sim/requests')).json.last_seq;
  let f = await ctl('POST', '/_sim/faults', { service: 'trace_core', status: 503, count: 1 });
  assert.equal(f.status, 200, f.text);
  assert.equal((await core('GET', '/capture-policy')).status, 503);
  assert.equal((await core('GET', '/capture-policy')).status, 200);

  f = await ctl('POST', '/_sim/faults', { service: 'trace_core', mode: 'close', count: 1 });
  assert.equal(f.status, 200);
  await assert.rejects(call('GET', `${BASE}/health`));
  assert.equal((await call('GET', `${BASE}/health`)).status, 200);

  await ctl('POST', '/_sim/faults', { service: 'trace_core', path_prefix: `${BASE}/health`, latency_ms: 300, count: 1 });
  const t0 = Date.now();
  assert.equal((await call('GET', `${BASE}/health`)).status, 200);
  assert.ok(Date.now() - t0 >= 290);

  const list = (await ctl('GET', '/_sim/faults')).json.faults;
  assert.deepEqual(list.map((x) => x.remaining), [0, 0, 0]);
  const reqs = (await call('GET', `/_sim/requests?service=trace_core&since=${since}`)).json.requests;
  assert.equal(reqs.length, 5);
  assert.ok(reqs.every((r) => r.service === 'trace_core'));
  assert.equal(reqs[0].path, `${BASE}/capture-policy`);
  assert.equal(reqs[0].headers['x-bkn-auth-method'], 'oauth');
});

test('/_sim/trace/state lists records; reset clears them', async () => {
  await ctl('POST', '/_sim/reset');
  let st = (await ctl('GET', '/_sim/trace/state')).json;
  for (const k of ['conversations', 'interactions', 'operations', 'receipts', 'artifacts']) assert.deepEqual(st[k], [], k);
  const turn = await startTurn();
  const big = '{"operation_key":"mcp:b","tool_name":"t","protocol":"sdk","source_module":"context-loader",'
    + '"input":{"mode":"inline","media_type":"application/json","byte_length":26,"inline":{"id":9007199254740993}},'
    + `"required":true,"lease_token":"${turn.interaction.lease_token}","lease_epoch":1}`;
  const r = await core('POST', `/conversations/${turn.cid}/interactions/${turn.iid}/operations:ensure`, big);
  assert.equal(r.status, 201, r.text);
  const text = (await ctl('GET', '/_sim/trace/state')).text;
  assert.ok(text.includes('{"id":9007199254740993}'), 'inputs are kept losslessly');
  st = parse(text);
  assert.equal(st.conversations.length, 1);
  assert.equal(st.interactions.length, 1);
  assert.equal(st.operations.length, 1);
  assert.equal(st.receipts.length, 1);
  assert.equal(st.receipts[0].owner.application_principal_id, 'demo-client');
  assert.equal(st.capture.capture, 'enabled');
  await ctl('POST', '/_sim/reset');
  st = (await ctl('GET', '/_sim/trace/state')).json;
  assert.equal(st.conversations.length + st.interactions.length + st.operations.length + st.receipts.length, 0);
  assertErr(await core('GET', `/interactions/${turn.iid}`), 404, 'resource_not_disclosed');
});
