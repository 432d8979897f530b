// Byte fidelity and identity forwarding over both surfaces:
// big integers, [] and {} reach the caller exactly as ontology-query sent them,
// and the simulator sees the derived identity, the request id and the trace id,
// never the caller's token. Assertions work on raw response text because
// JSON.parse would round 9007199254740993.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';

const TOKEN = 'demo-user-token';
const QUERY_ARGS =
  '{"kn_id":"kn_medical","ot_id":"ot_drug","condition":{"field":"drug_id","operation":"==","value":9007199254740993}}';
// The same arguments asking MCP for the JSON text block (MCP defaults to TOON):
// the byte comparisons with the REST body need JSON on both sides.
const asJson = (argsJson) => argsJson.replace(/^\{/, '{"response_format":"json",');
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

let stack;
let sid;

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${TOKEN}`,
      ...headers,
    },
    body,
    signal: AbortSignal.timeout(10000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

const rest = (tool, body, headers) => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers);
const mcp = (body, headers = {}) => post(stack.server.mcpUrl, body, { 'mcp-session-id': sid, ...headers });
const toolsCall = (name, argsJson, headers) =>
  mcp(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"${name}","arguments":${argsJson}}}`, headers);

async function simRequests(service, since) {
  const r = await fetch(`${stack.sim.base}/_sim/requests?service=${service}&since=${since}`, {
    signal: AbortSignal.timeout(5000),
  });
  return r.json();
}

async function lastSeq() {
  return (await simRequests('none', 1e15)).last_seq;
}

// The raw text of the JSON value starting at text[start] ('{' or '['), found by
// bracket matching outside strings.
function rawValueAt(text, start) {
  let depth = 0;
  let inStr = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inStr) {
      if (ch === '\\') i++;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') inStr = true;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  throw new Error(`unterminated value at ${start}`);
}

// The raw text of the value of the first "key": in a JSON text.
function rawMember(text, key) {
  const at = text.indexOf(`"${key}":`);
  assert.ok(at >= 0, `"${key}" not in ${text.slice(0, 300)}`);
  return rawValueAt(text, at + key.length + 3);
}

// The MCP text block, unescaped losslessly: only the string literal is parsed.
function textBlock(text) {
  const m = /"content":\[\{"type":"text","text":("(?:[^"\\]|\\.)*")\}/.exec(text);
  assert.ok(m, `no text block in ${text.slice(0, 300)}`);
  return JSON.parse(m[1]);
}

before(async () => {
  stack = await startStack({ capture: 'disabled' });
  const r = await post(
    stack.server.mcpUrl,
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fidelity","version":"1"}}}',
  );
  assert.equal(r.status, 200, r.text);
  sid = r.headers.get('mcp-session-id');
  assert.ok(sid);
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

test('query_object_instance returns the simulator row byte for byte on REST and MCP', async () => {
  const simRes = await post(
    `${stack.sim.base}/api/ontology-query/in/v1/knowledge-networks/kn_medical/object-types/ot_drug`,
    '{"condition":{"field":"drug_id","operation":"==","value":9007199254740993}}',
    { 'x-http-method-override': 'GET', 'x-account-id': 'u_demo', 'x-account-type': 'user' },
  );
  assert.equal(simRes.status, 200, simRes.text);
  const rowAt = simRes.text.indexOf('{"drug_id":9007199254740993');
  assert.ok(rowAt > 0, simRes.text);
  const simRow = rawValueAt(simRes.text, rowAt);
  for (const bytes of ['"drug_id":9007199254740993', '"batch_no":12345678901234567890123', '"tags":[]', '"ext":{}'])
    assert.ok(simRow.includes(bytes), `simulator row lacks ${bytes}: ${simRow}`);
  // The tool drops _score when no match/knn condition asked for scoring; every
  // other byte of the row is passed through.
  assert.match(simRow, /,"_score":0\}$/);
  const row = simRow.replace(/,"_score":0\}$/, '}');

  const since = await lastSeq();
  const r = await rest('query_object_instance', QUERY_ARGS);
  assert.equal(r.status, 200, r.text);
  assert.ok(r.text.includes(row), `REST body lacks the row:\n${r.text}\nwant:\n${row}`);
  assert.equal(rawMember(r.text, 'datas'), `[${row}]`);
  assert.ok(r.text.includes('"search_after":[9007199254740993]'), r.text);

  // The condition reached ontology-query with the integer text unchanged.
  const recs = (await simRequests('ontology_query', since)).requests;
  assert.equal(recs.length, 1);
  assert.ok(recs[0].body.includes('"value":9007199254740993'), recs[0].body);

  const m = await toolsCall('query_object_instance', asJson(QUERY_ARGS));
  assert.equal(m.status, 200, m.text);
  assert.ok(m.text.includes('"isError":false'), m.text);
  const structured = rawMember(m.text, 'structuredContent');
  assert.ok(structured.includes(row), `structuredContent lacks the row:\n${structured}`);
  const block = textBlock(m.text);
  assert.ok(block.includes(row), `text block lacks the row:\n${block}`);
  // Both surfaces give the same result object.
  assert.equal(structured, r.text);
  assert.equal(block, r.text);
});

test('a near-miss big integer does not match the row (no rounding on the way)', async () => {
  const r = await rest(
    'query_object_instance',
    '{"kn_id":"kn_medical","ot_id":"ot_drug","condition":{"field":"drug_id","operation":"==","value":9007199254740992}}',
  );
  assert.equal(r.status, 200, r.text);
  assert.ok(!r.text.includes('9007199254740993'), r.text);
  assert.ok(r.text.includes('"datas":[]'), r.text);
});

test('list_knowledge_networks over REST forwards identity, request id and trace id, never the token', async () => {
  const since = await lastSeq();
  const rid = 'req_fidelity-rest-0001';
  const r = await rest('list_knowledge_networks', '{}', { 'bkn-request-id': rid, traceparent: TRACEPARENT });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('bkn-request-id'), rid);
  for (const kn of ['kn_medical', 'kn_ops', 'kn_supplychain']) assert.ok(r.text.includes(`"id":"${kn}"`), r.text);
  assert.ok(r.text.includes('"total_count":3'), r.text);

  const recs = (await simRequests('bkn_backend', since)).requests;
  assert.equal(recs.length, 1, JSON.stringify(recs));
  const h = recs[0].headers;
  assert.equal(h['x-account-id'], 'u_demo');
  assert.equal(h['x-account-type'], 'user');
  assert.equal(h['bkn-request-id'], rid);
  assert.match(h.traceparent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-[0-9a-f]{2}$`));
  assert.equal(h.authorization, undefined);
  assert.ok(!JSON.stringify(recs[0]).includes(TOKEN), 'the token leaked downstream');
});

test('list_knowledge_networks over MCP forwards the same and matches the REST result', async () => {
  const restRes = await rest('list_knowledge_networks', '{}');
  assert.equal(restRes.status, 200, restRes.text);
  const since = await lastSeq();
  const rid = 'req_fidelity-mcp-0002';
  const m = await toolsCall('list_knowledge_networks', '{"response_format":"json"}', { 'bkn-request-id': rid, traceparent: TRACEPARENT });
  assert.equal(m.status, 200, m.text);
  assert.equal(m.headers.get('bkn-request-id'), rid);
  assert.ok(m.text.includes('"isError":false'), m.text);
  assert.equal(rawMember(m.text, 'structuredContent'), restRes.text);
  assert.equal(textBlock(m.text), restRes.text);

  const recs = (await simRequests('bkn_backend', since)).requests;
  assert.equal(recs.length, 1, JSON.stringify(recs));
  const h = recs[0].headers;
  assert.equal(h['x-account-id'], 'u_demo');
  assert.equal(h['x-account-type'], 'user');
  assert.equal(h['bkn-request-id'], rid);
  assert.match(h.traceparent, new RegExp(`^00-${TRACE_ID}-`));
  assert.equal(h.authorization, undefined);
  assert.ok(!JSON.stringify(recs[0]).includes(TOKEN), 'the token leaked downstream');

  // Without response_format the text block is TOON (the MCP default); the
  // structured result is the same object, byte for byte.
  const d = await toolsCall('list_knowledge_networks', '{}');
  assert.equal(d.status, 200, d.text);
  assert.ok(d.text.includes('"isError":false'), d.text);
  assert.equal(rawMember(d.text, 'structuredContent'), restRes.text);
  const toon = textBlock(d.text);
  assert.match(toon, /^entries\[3\]\{id,name,business_domain,module_type,description\}:\n  kn_/, toon);
  assert.match(toon, /\ntotal_count: 3$/, toon);
  assert.ok(!toon.trimStart().startsWith('{'), toon);
});

test('without a caller request id the generated one is returned and forwarded', async () => {
  const since = await lastSeq();
  const r = await rest('list_knowledge_networks', '{}', { 'bkn-request-id': 'not-valid' });
  assert.equal(r.status, 200, r.text);
  const rid = r.headers.get('bkn-request-id');
  assert.match(rid, /^req_[0-9a-f-]{36}$/);
  const recs = (await simRequests('bkn_backend', since)).requests;
  assert.equal(recs.length, 1);
  assert.equal(recs[0].headers['bkn-request-id'], rid);
  assert.match(recs[0].headers.traceparent ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);
});

test('an app token is forwarded as x-account-type app', async () => {
  const since = await lastSeq();
  const r = await rest('list_knowledge_networks', '{}', { authorization: 'Bearer demo-app-token' });
  assert.equal(r.status, 200, r.text);
  const recs = (await simRequests('bkn_backend', since)).requests;
  assert.equal(recs.length, 1);
  assert.equal(recs[0].headers['x-account-id'], 'demo-app');
  assert.equal(recs[0].headers['x-account-type'], 'app');
});
