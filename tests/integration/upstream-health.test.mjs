// When an upstream fails, the operator sees which and why: one warn line per failure
// (upstream, host:port, method, path, reason or status, duration, request id),
// cl_upstream_failures_total by upstream and reason, and /health/ready's
// upstream_status with the last success and the last failure (when, why).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startStack } from './lib/stack.mjs';
import { client, sleep } from './lib/faultkit.mjs';

// Waits for a log line (any kind) that pred accepts; returns it or undefined.
async function waitLine(server, pred, timeoutMs = 5000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const hit = server.logs.join('').split('\n').flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } }).find(pred);
    if (hit || Date.now() > end) return hit;
    await sleep(50);
  }
}

// A port nothing listens on: bound, then closed.
async function deadPort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

function metric(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : undefined;
}

test('a dead upstream and a 5xx are logged, counted and shown by readiness', async () => {
  const port = await deadPort();
  const stack = await startStack({ capture: 'disabled', env: { CL_UPSTREAM_BKN_BACKEND_URL: `http://127.0.0.1:${port}/api/bkn-backend` } });
  const c = client(stack);
  try {
    // before any call: configured, nothing seen
    let ready = await (await fetch(`${stack.server.base}/health/ready`)).json();
    assert.equal(ready.upstreams.bkn_backend, true);
    assert.deepEqual(ready.upstream_status.bkn_backend, { configured: true, last_success: null, last_failure: null, last_failure_reason: null });

    const r = await c.rest('list_knowledge_networks', {});
    assert.equal(r.status, 502, r.text);
    const line = await waitLine(stack.server, (j) => j.msg === 'upstream failure' && j.upstream === 'bkn_backend');
    assert.ok(line, 'warn line for bkn_backend');
    assert.equal(line.level, 'warn');
    assert.equal(line.host, `127.0.0.1:${port}`);
    assert.equal(line.method, 'GET');
    assert.match(line.path, /^\//);
    assert.equal(line.reason, 'unreachable');
    assert.equal(line.tool, 'list_knowledge_networks');
    assert.match(line.request_id, /^req_/);
    assert.equal(typeof line.duration_ms, 'number');

    // a 5xx from ontology-query: reason http_5xx with the status
    await c.fault({ service: 'ontology_query', status: 500, count: 1 });
    const q = await c.rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
    assert.ok(q.status >= 500, q.text);
    const five = await waitLine(stack.server, (j) => j.msg === 'upstream failure' && j.upstream === 'ontology_query');
    assert.equal(five.reason, 'http_5xx');
    assert.equal(five.status, 500);
    // and a success afterwards
    const ok = await c.rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
    assert.equal(ok.status, 200, ok.text);

    ready = await (await fetch(`${stack.server.base}/health/ready`)).json();
    const bb = ready.upstream_status.bkn_backend;
    assert.equal(bb.last_success, null);
    assert.match(bb.last_failure, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(bb.last_failure_reason, 'unreachable');
    const oq = ready.upstream_status.ontology_query;
    assert.match(oq.last_success, /Z$/);
    assert.equal(oq.last_failure_reason, 'http_5xx');

    const text = await (await fetch(`${stack.server.admin}/metrics`)).text();
    assert.equal(metric(text, 'cl_upstream_failures_total{upstream="bkn_backend",reason="unreachable"}'), 1);
    assert.equal(metric(text, 'cl_upstream_failures_total{upstream="ontology_query",reason="http_5xx"}'), 1);
    assert.equal(metric(text, 'cl_upstream_successes_total{upstream="ontology_query"}') >= 1, true);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});
