// A minimal MCP Streamable HTTP client over fetch for the surface tests (info,
// compact, html): initialize, tools/list over every page, tools/call, GET info.
// Every request is bounded in time.
import assert from 'node:assert/strict';

export const TOKEN = 'demo-user-token';
const TIMEOUT_MS = 15000;

export async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

export async function get(url, headers = {}) {
  const r = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}`, ...headers }, signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

// An initialized session on one surface URL; headers go with every request.
export async function session(url, headers = {}) {
  const init = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'surface-test', version: '1' } } }, headers);
  assert.equal(init.status, 200, init.text);
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid);
  const h = { ...headers, 'mcp-session-id': sid };
  const note = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  assert.equal(note.status, 202);
  let id = 1;
  const rpc = async (method, params) => post(url, { jsonrpc: '2.0', id: ++id, method, params }, h);
  return {
    init: init.json.result,
    rpc,
    // tools/list, following nextCursor to the end.
    async listAll() {
      const tools = [];
      let cursor;
      for (let i = 0; i < 100; i++) {
        const r = await rpc('tools/list', cursor ? { cursor } : {});
        assert.equal(r.status, 200, r.text);
        assert.ok(r.json.result, r.text);
        tools.push(...r.json.result.tools);
        cursor = r.json.result.nextCursor;
        if (!cursor) return tools;
      }
      throw new Error('tools/list never ended');
    },
    async call(name, args, meta) {
      const r = await rpc('tools/call', { name, arguments: args, ...(meta ? { _meta: meta } : {}) });
      assert.equal(r.status, 200, r.text);
      return r.json;
    },
  };
}

// A tools/list entry in the flat shape of /mcp/info (docs/info.md).
export function flatten(entry) {
  const m = entry._meta || {};
  const t = { name: entry.name };
  if (entry.title !== undefined) t.title = entry.title;
  if (m['openbkn.ai/group'] !== undefined) t.group = m['openbkn.ai/group'];
  if (m['openbkn.ai/group_title'] !== undefined) t.group_title = m['openbkn.ai/group_title'];
  if (m['openbkn.ai/order'] !== undefined) t.order = m['openbkn.ai/order'];
  if (entry.description !== undefined) t.description = entry.description;
  if (entry.inputSchema !== undefined) t.input_schema = entry.inputSchema;
  if (entry.outputSchema !== undefined) t.output_schema = entry.outputSchema;
  return t;
}
