// Mcp-Session-Id carries its expiry under the HMAC (session.max_age_s): an id stops
// working at that time whatever the state store remembers, so an ended session that
// a Redis restart without persistence forgot can come back at most until then.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack } from './lib/stack.mjs';
import { which, freePort, sleep, waitFor, startRedisServer } from './lib/redis.mjs';
import { stop } from './lib/stack.mjs';

const REDIS = which('redis-server');

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token', ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}
const ping = (url, sid) => post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': sid });

async function initialize(url) {
  const r = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'expiry', version: '1' } } });
  assert.equal(r.status, 200, r.text);
  return r.headers.get('mcp-session-id');
}

test('a session id expires at the time signed into it; the expiry cannot be edited', { timeout: 30000 }, async () => {
  const stack = await startStack({ capture: 'disabled', env: { CL_SESSION_MAX_AGE_S: '2' } });
  try {
    const url = stack.server.mcpUrl;
    const before = Math.floor(Date.now() / 1000);
    const sid = await initialize(url);
    const after = Math.ceil(Date.now() / 1000);
    const m = /^([0-9a-f]{32})\.([0-9a-f]{8})\.([0-9a-f]{32})$/.exec(sid);
    assert.ok(m, sid);
    const exp = parseInt(m[2], 16);
    // issued between the two readings, 2 s ahead (bracketed: no bound on the speed)
    assert.ok(exp >= before + 2 && exp <= after + 2, `expiry ${exp} not in [${before + 2}, ${after + 2}]`);
    assert.equal((await ping(url, sid)).status, 200);
    const later = `${m[1]}.${(exp + 86400).toString(16).padStart(8, '0')}.${m[3]}`;
    assert.equal((await ping(url, later)).status, 404, 'an edited expiry must not verify');
    await sleep(Math.max(0, (exp + 1) * 1000 - Date.now()) + 100);
    const r = await ping(url, sid);
    assert.equal(r.status, 404, r.text);
    assert.match(r.text, /expired/);
  } finally {
    await stack.stop();
  }
});

test('an ended session forgotten by a Redis restart stays refused once its id expired', { timeout: 60000, skip: !REDIS && 'redis-server is not installed' }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-sess-'));
  const port = await freePort();
  let redis = await startRedisServer(REDIS, { port, dir: tmp }); // no persistence
  const stack = await startStack({ capture: 'disabled', env: { CL_STATE_STORE: `redis://127.0.0.1:${port}`, CL_SESSION_MAX_AGE_S: '3' } });
  try {
    const url = stack.server.mcpUrl;
    const sid = await initialize(url);
    const exp = parseInt(sid.split('.')[1], 16);
    const del = await fetch(url, { method: 'DELETE', headers: { authorization: 'Bearer demo-user-token', 'mcp-session-id': sid }, signal: AbortSignal.timeout(5000) });
    await del.text();
    assert.ok(del.status >= 200 && del.status < 300, `DELETE gave ${del.status}`);
    assert.equal((await ping(url, sid)).status, 404);
    await stop(redis, 'SIGKILL');
    redis = await startRedisServer(REDIS, { port, dir: tmp }); // the ended record is gone
    let st;
    await waitFor(async () => { st = (await ping(url, sid)).status; return st !== 503; }, 10000, 'the store to reconnect');
    // (within its lifetime the forgotten session answers again: the store needs persistence)
    await sleep(Math.max(0, (exp + 1) * 1000 - Date.now()) + 100);
    const r = await ping(url, sid);
    assert.equal(r.status, 404, r.text);
  } finally {
    await stack.stop();
    await stop(redis);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
