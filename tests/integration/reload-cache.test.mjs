// Reloads reuse the validated catalogue entries of unchanged files (fast reloads),
// but only while the runtime (lua/) and the shared helpers (tools/_lib/) are unchanged
// too: a tool whose schema comes from a _lib module is checked again when that module
// changes, and a broken module rejects the reload.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT } from './lib/stack.mjs';

const TOOL = `local shapes = require "_lib.shapes"
return {
    name = "shape_tool", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "形状", ["en-US"] = "Shape" },
    description = { ["zh-CN"] = "测试工具。", ["en-US"] = "A test tool." },
    group = "discovery", order = 901, surfaces = { "rest" },
    input_schema = shapes.input,
    handle = function(args) return { echo = args.x or "none" } end,
}
`;
const LIB_OK = 'local M = {}\nM.input = { type = "object", properties = { x = { type = "string" } } }\nreturn M\n';
const LIB_DESC = 'local M = {}\nM.input = { type = "object", properties = { x = { type = "string", description = "changed" } } }\nreturn M\n';
const LIB_BAD = 'local M = {}\nM.input = { type = "object", properties = { x = { type = "string", frobnicate = true } } }\nreturn M\n';

test('unchanged files reuse their entries; a changed _lib module is checked again', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-cache-'));
  fs.cpSync(path.join(ROOT, 'tools'), dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'shape_tool.lua'), TOOL);
  fs.writeFileSync(path.join(dir, '_lib', 'shapes.lua'), LIB_OK);
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: dir } });
  const reload = async () => {
    const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    return { status: r.status, json: await r.json() };
  };
  try {
    assert.equal((await reload()).status, 200); // everything unchanged: the cached path
    fs.writeFileSync(path.join(dir, '_lib', 'shapes.lua'), LIB_BAD);
    const bad = await reload();
    assert.equal(bad.status, 422, JSON.stringify(bad.json));
    assert.match(JSON.stringify(bad.json), /frobnicate/);
    fs.writeFileSync(path.join(dir, '_lib', 'shapes.lua'), LIB_DESC);
    assert.equal((await reload()).status, 200);
    const r = await fetch(`${stack.server.base}/api/agent-retrieval/v1/kn/shape_tool`, {
      method: 'POST', headers: { authorization: 'Bearer demo-user-token', 'content-type': 'application/json' },
      body: '{"x":"hi"}', signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { echo: 'hi' });
  } finally {
    assert.equal(await stack.stop(), 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
