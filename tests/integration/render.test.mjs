// A tool chooses its own TOON layout with render(result, ctx) (the rendering
// choices stay in the tool's Lua file): the text block / REST toon body is the render's
// encoding, structuredContent and JSON stay the full result.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const TOOL = `return {
    name = "render_demo", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "渲染示例", ["en-US"] = "Render demo" },
    description = { ["zh-CN"] = "测试工具。", ["en-US"] = "A test tool." },
    group = "discovery", order = 902, surfaces = { "mcp", "rest" },
    input_schema = { type = "object", additionalProperties = false, properties = {} },
    handle = function()
        return { rows = { { id = 1, name = "a", extra = { deep = true } }, { id = 2, name = "b", extra = { deep = false } } } }
    end,
    -- TOON text: a table of id and name only
    render = function(res)
        local out = {}
        for i, r in ipairs(res.rows) do out[i] = { id = r.id, name = r.name } end
        return { rows = out }
    end,
}
`;

test('render() shapes the TOON text; JSON and structuredContent keep the full result', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-render-'));
  fs.cpSync(path.join(ROOT, 'tools'), dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'render_demo.lua'), TOOL);
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: dir } });
  const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token' };
  try {
    let r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }), signal: AbortSignal.timeout(5000) });
    H['mcp-session-id'] = r.headers.get('mcp-session-id');
    const call = async (args) => (await (await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'render_demo', arguments: args } }), signal: AbortSignal.timeout(5000) })).json()).result;
    const toon = await call({});
    assert.equal(toon.content[0].text, 'rows[2]{id,name}:\n  1,a\n  2,b');
    assert.deepEqual(toon.structuredContent.rows[0].extra, { deep: true });
    const json = await call({ response_format: 'json' });
    assert.deepEqual(JSON.parse(json.content[0].text), json.structuredContent);
    assert.equal(json.structuredContent.rows.length, 2);
    r = await fetch(`${stack.server.base}${PREFIX}/kn/render_demo?response_format=toon`, { method: 'POST', headers: H, body: '{}', signal: AbortSignal.timeout(5000) });
    assert.match(r.headers.get('content-type'), /^application\/toon/);
    assert.equal(await r.text(), 'rows[2]{id,name}:\n  1,a\n  2,b');
    r = await fetch(`${stack.server.base}${PREFIX}/kn/render_demo`, { method: 'POST', headers: H, body: '{}', signal: AbortSignal.timeout(5000) });
    assert.equal((await r.json()).rows[1].extra.deep, false);
  } finally {
    assert.equal(await stack.stop(), 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
