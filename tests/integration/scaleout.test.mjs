// Scale-out: two context-loader instances share one redis-server and sit
// behind nginx (round-robin), all on 127.0.0.1, started here and stopped by PID.
// A retry landing on the other instance (on any MCP surface) replays the original
// result with one downstream execution; concurrent duplicates spread over both run
// once; sessions minted or ended on one instance are honoured by the other; killing
// Redis gives the documented retryable errors, and service resumes after a restart,
// with no duplicate execution. Skipped when redis-server or nginx is missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSimulator, startServer, stop, PREFIX } from './lib/stack.mjs';
import { which, freePort, waitFor, startRedisServer } from './lib/redis.mjs';
import { startNginx } from './lib/lb.mjs';

const REDIS = which('redis-server');
const NGINX = which('nginx');
const SKIP = !REDIS ? 'redis-server is not installed (apt-get install redis-server)'
  : !NGINX ? 'nginx is not installed (apt-get install nginx)' : false;

const INV = 'X-OpenBKN-Client-Invocation-Id';
const SECRET = 'scaleout-test-secret';
let tmp, redis, redisPort, nginx, lbPort, sim, A, B, T;
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

// AOF with fsync on every write: what was stored survives kill -9 (as in production,
// where losing idempotency records on a Redis restart would allow a second run).
async function startRedis() {
  redis = await startRedisServer(REDIS, { port: redisPort, dir: tmp, durable: true });
}

async function startLb(ports) {
  nginx = await startNginx(NGINX, { dir: tmp, port: lbPort, upstreams: ports });
}

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(15000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

const mcpUrl = (base) => `${base}${PREFIX}/mcp`;
const LB = () => `http://127.0.0.1:${lbPort}`;

async function initialize(base) {
  const r = await post(mcpUrl(base), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'scaleout', version: '1' } } });
  assert.equal(r.status, 200, r.text);
  return r.headers.get('mcp-session-id');
}
const ping = (base, sid) => post(mcpUrl(base), { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid });
async function endSession(base, sid) {
  return fetch(mcpUrl(base), { method: 'DELETE', headers: { authorization: 'Bearer demo-user-token', 'mcp-session-id': sid }, signal: AbortSignal.timeout(5000) });
}

const rest = (base, tool, body, headers = {}) => post(`${base}${PREFIX}/kn/${tool}`, body, headers);
const query = (extra = {}) => ({ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 3, ...extra });
const simCall = async (method, p, body) => {
  const r = await fetch(`${sim.base}${p}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  assert.ok(r.ok, `${method} ${p}: ${r.status}`);
  return r.json();
};
const lastSeq = async () => (await simCall('GET', '/_sim/requests')).last_seq;
const isQuery = (r) => r.method === 'POST' && /\/object-types\/[^/?]+(\?|$)/.test(r.path);
const executions = async (since) => (await simCall('GET', `/_sim/requests?since=${since}&service=ontology_query`)).requests.filter(isQuery).length;

before(async () => {
  if (SKIP) return;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-scaleout-'));
  fs.chmodSync(tmp, 0o755); // nginx workers may run as another user
  redisPort = await freePort();
  lbPort = await freePort();
  await startRedis();
  sim = await startSimulator({ capture: 'enabled' });
  const env = {
    CL_STATE_STORE: `redis://127.0.0.1:${redisPort}/0`,
    CL_SESSION_SECRET: SECRET,
    CL_STATE_STORE_COMMAND_TIMEOUT_MS: '500',
    CL_STATE_STORE_RECONNECT_MAX_MS: '300',
    CL_STATE_STORE_KEY_PREFIX: `scaleout-${process.pid}:`,
  };
  A = await startServer(sim.base, { env });
  B = await startServer(sim.base, { env });
  await startLb([new URL(A.base).port, new URL(B.base).port]);
  const sid = await initialize(A.base);
  const r = await post(mcpUrl(A.base), { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'scaleout', conversation_mode: 'new' } } }, { 'mcp-session-id': sid });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.result.isError, false, r.text);
  const s = r.json.result.structuredContent;
  T = { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
});

after(async () => {
  if (nginx) await stop(nginx, 'SIGQUIT');
  const codes = [];
  for (const s of [A, B]) if (s) codes.push(await s.stop());
  if (sim) await sim.stop();
  if (redis) await stop(redis);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  for (const c of codes) assert.equal(c, 0);
});

test('a session id minted by one instance works on the other', { skip: SKIP }, async () => {
  const sid = await initialize(A.base);
  const r = await ping(B.base, sid);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.result, {});
});

test('a session ended on one instance is refused on the other', { skip: SKIP }, async () => {
  const sid = await initialize(A.base);
  assert.equal((await ping(B.base, sid)).status, 200);
  assert.equal((await endSession(B.base, sid)).status, 204);
  for (const base of [A.base, B.base]) {
    const r = await ping(base, sid);
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json.error.code, -32001);
  }
});

test('a retry with the same invocation id on the other instance replays the original, one execution', { skip: SKIP }, async () => {
  const id = uniq('inv');
  const seq = await lastSeq();
  const a = await rest(A.base, 'query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(a.status, 200, a.text);
  assert.match(a.headers.get('bkn-receipt-id') || '', /^rcpt_/);
  const b = await rest(B.base, 'query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.text, a.text);
  assert.equal(b.headers.get('bkn-receipt-id'), a.headers.get('bkn-receipt-id'));
  // and through the load balancer, landing on both instances in turn
  const seen = new Set();
  for (let i = 0; i < 4; i++) {
    const r = await rest(LB(), 'query_object_instance', query({ bkn_context: T }), { [INV]: id });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, a.text);
    seen.add(r.headers.get('x-upstream'));
  }
  assert.equal(seen.size, 2, `round-robin over both instances: ${[...seen]}`);
  assert.equal(await executions(seq), 1);
  // other input under the same id is a conflict on the other instance too
  const c = await rest(B.base, 'query_object_instance', query({ limit: 4, bkn_context: T }), { [INV]: id });
  assert.equal(c.status, 409, c.text);
  assert.equal(c.json.code, 'idempotency_conflict');
  assert.equal(await executions(seq), 1);
});

test('an MCP retry that moves to the other instance and to /mcp-compact replays the original', { skip: SKIP }, async () => {
  const id = uniq('mcp-move');
  const call = async (url) => {
    const init = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'scaleout', version: '1' } } });
    assert.equal(init.status, 200, init.text);
    const params = { name: 'query_object_instance', arguments: query({ bkn_context: T }), _meta: { 'openbkn.ai/client-invocation-id': id } };
    const r = await post(url, { jsonrpc: '2.0', id: 4, method: 'tools/call', params }, { 'mcp-session-id': init.headers.get('mcp-session-id') });
    assert.equal(r.status, 200, r.text);
    return r;
  };
  const seq = await lastSeq();
  const a = await call(mcpUrl(A.base));
  assert.equal(a.json.result.isError, false, a.text);
  const b = await call(`${B.base}${PREFIX}/mcp-compact`);
  assert.equal(b.text, a.text);
  assert.equal(await executions(seq), 1);
});

// A stateless (protocol 2026-07-28) tools/call: no session, the request carries it all.
const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'scaleout', version: '1' },
};
const modernCall = (url, id, params) => post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: { ...MODERN_META, ...params._meta } } },
  { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': params.name });

test('a stateless retry on the other instance replays the original, one execution', { skip: SKIP }, async () => {
  const params = { name: 'query_object_instance', arguments: query({ bkn_context: T }), _meta: { 'openbkn.ai/client-invocation-id': uniq('modern') } };
  const seq = await lastSeq();
  const a = await modernCall(mcpUrl(A.base), 1, params);
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.result.isError, false, a.text);
  assert.equal(a.json.result.resultType, 'complete');
  const b = await modernCall(`${B.base}${PREFIX}/mcp-compact`, 2, params);
  assert.equal(b.status, 200, b.text);
  assert.equal(b.json.id, 2);
  assert.deepEqual(b.json.result, a.json.result);
  assert.equal(b.headers.get('mcp-session-id'), null);
  assert.equal(await executions(seq), 1);
});

test('a retry that moves from a session on one instance to a stateless request on the other replays', { skip: SKIP }, async () => {
  const params = { name: 'query_object_instance', arguments: query({ bkn_context: T }), _meta: { 'openbkn.ai/client-invocation-id': uniq('era-move') } };
  const seq = await lastSeq();
  const sid = await initialize(A.base);
  const a = await post(mcpUrl(A.base), { jsonrpc: '2.0', id: 4, method: 'tools/call', params }, { 'mcp-session-id': sid });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.result.isError, false, a.text);
  const b = await modernCall(mcpUrl(B.base), 5, params);
  assert.equal(b.status, 200, b.text);
  assert.deepEqual(b.json.result.structuredContent, a.json.result.structuredContent);
  assert.deepEqual(b.json.result.content, a.json.result.content);
  assert.equal(b.json.result.resultType, 'complete');
  assert.equal(await executions(seq), 1);
});

test('concurrent duplicates spread over both instances run once', { skip: SKIP }, async () => {
  const id = uniq('burst');
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', latency_ms: 400, count: 1 });
  const seq = await lastSeq();
  const body = JSON.stringify(query({ bkn_context: T }));
  const all = await Promise.all(Array.from({ length: 10 }, () => rest(LB(), 'query_object_instance', body, { [INV]: id })));
  const upstreams = new Set(all.map((r) => r.headers.get('x-upstream')));
  assert.equal(upstreams.size, 2, `both instances served: ${[...upstreams]}`);
  for (const r of all) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, all[0].text);
  }
  assert.equal(await executions(seq), 1);
});

test('Redis killed and restarted: retryable errors, then service resumes; no duplicate execution', { skip: SKIP }, async () => {
  // before the outage: one call recorded, one session alive, one ended
  const before = uniq('pre');
  const seq = await lastSeq();
  const orig = await rest(A.base, 'query_object_instance', query({ bkn_context: T }), { [INV]: before });
  assert.equal(orig.status, 200, orig.text);
  const live = await initialize(A.base);
  const ended = await initialize(B.base);
  assert.equal((await endSession(A.base, ended)).status, 204);

  await stop(redis, 'SIGKILL');
  redis = null;
  const during = uniq('during');
  for (const base of [A.base, B.base]) {
    // a call with an invocation id needs the shared records: 503, retryable, nothing runs
    const r = await rest(base, 'query_object_instance', query({ bkn_context: T }), { [INV]: during });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.code, 'state_store_unavailable');
    assert.equal(r.json.retryable, true);
    // a session check needs the shared ended-session set: 503, never a silent accept
    for (const sid of [live, ended]) {
      const p = await ping(base, sid);
      assert.equal(p.status, 503, p.text);
      assert.equal(p.headers.get('retry-after'), '1');
      assert.equal(p.json.error.data.code, 'state_store_unavailable');
      assert.equal(p.json.error.data.retryable, true);
    }
    // ending a session cannot be recorded: 503 (the client retries), not a silent 204
    assert.equal((await endSession(base, live)).status, 503);
  }
  assert.equal(await executions(seq), 1, 'nothing ran during the outage');
  // a REST call without a retry hint needs no shared state and keeps working
  const plain = await rest(LB(), 'query_object_instance', query({ bkn_context: T }));
  assert.equal(plain.status, 200, plain.text);
  assert.equal(await executions(seq), 2);

  await startRedis();
  // both instances reconnect by themselves (no restart)
  for (const base of [A.base, B.base])
    await waitFor(async () => (await ping(base, live)).status === 200, 5000, `${base} after the Redis restart`);
  // what was recorded before the outage still holds
  for (const base of [A.base, B.base]) {
    const r = await rest(base, 'query_object_instance', query({ bkn_context: T }), { [INV]: before });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, orig.text);
    assert.equal((await ping(base, ended)).status, 404);
  }
  // the call refused during the outage now runs, exactly once, wherever it lands
  const r1 = await rest(B.base, 'query_object_instance', query({ bkn_context: T }), { [INV]: during });
  assert.equal(r1.status, 200, r1.text);
  const r2 = await rest(A.base, 'query_object_instance', query({ bkn_context: T }), { [INV]: during });
  assert.equal(r2.text, r1.text);
  assert.equal(await executions(seq), 3);
});
