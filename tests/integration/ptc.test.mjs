// PTC (docs/ptc.md): /mcp/ptc with its 4 tools, run_code scripts that
// call business functions through the stub (recorded under the caller's interaction),
// run_shell sharing the conversation's work directory, the toolkit and its deprecated
// alias, the version across reloads, and the EXECUTE_SKILL_ENABLED gate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSimulator, startServer, ROOT, PREFIX } from './lib/stack.mjs';

const TOKEN = 'demo-user-token';
let sim; let on; let off; let toolsDir;

function headers(extra = {}) {
  return { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...extra };
}

async function rpc(url, body, sid, extra) {
  const h = headers(extra);
  if (sid) h['mcp-session-id'] = sid;
  const r = await fetch(url, { method: 'POST', headers: h, body: JSON.stringify(body), signal: AbortSignal.timeout(60000) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: text ? JSON.parse(text) : null };
}

async function session(url) {
  const r = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ptc-test', version: '1' } } });
  assert.equal(r.status, 200, r.text);
  const sid = r.headers.get('mcp-session-id');
  await rpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, sid);
  let id = 10;
  return {
    sid,
    list: async () => (await rpc(url, { jsonrpc: '2.0', id: ++id, method: 'tools/list', params: {} }, sid)).json.result.tools,
    call: async (name, args) => {
      const res = await rpc(url, { jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } }, sid);
      assert.equal(res.status, 200, res.text);
      return res.json;
    },
  };
}

async function startTurn(s) {
  const r = await s.call('bkn_start_interaction', { question: 'ptc test', agent_name: 'ptc-test', conversation_mode: 'new' });
  assert.ok(!r.result.isError, JSON.stringify(r));
  const { conversation_id, interaction_id } = r.result.structuredContent;
  return { conversation_id, interaction_id };
}

const get = (url, h = {}) => fetch(url, { headers: { authorization: `Bearer ${TOKEN}`, ...h }, signal: AbortSignal.timeout(15000) });
const traceState = async () => (await fetch(`${sim.base}/_sim/trace/state`)).json();

before(async () => {
  sim = await startSimulator();
  // a private copy of tools/, so that a test can add a tool and reload
  toolsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-ptc-tools-'));
  fs.cpSync(path.join(ROOT, 'tools'), toolsDir, { recursive: true });
  on = await startServer(sim.base, { env: { EXECUTE_SKILL_ENABLED: 'true', CL_TOOLS_DIR: toolsDir } });
  off = await startServer(sim.base, { env: { EXECUTE_SKILL_ENABLED: 'false' } });
});

after(async () => {
  if (on) await on.stop();
  if (off) await off.stop();
  if (sim) await sim.stop();
  if (toolsDir) fs.rmSync(toolsDir, { recursive: true, force: true });
});

test('/mcp/ptc lists exactly the 4 tools; bkn_context required; run_code describes the sandbox functions', async () => {
  const s = await session(`${on.base}${PREFIX}/mcp/ptc`);
  const tools = await s.list();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['bkn_finish_interaction', 'bkn_start_interaction', 'run_code', 'run_shell']);
  for (const name of ['run_code', 'run_shell']) {
    const t = tools.find((x) => x.name === name);
    assert.ok(t.inputSchema.required.includes('bkn_context'), `${name}: bkn_context is required`);
    assert.equal(t._meta['openbkn.ai/group'], 'execution');
  }
  const rc = tools.find((t) => t.name === 'run_code');
  assert.match(rc.description, /query_object_instance\(kn_id: str, ot_id: str/);
  assert.match(rc.description, /execute_skill\(/, 'gate on: execute_skill is a sandbox function');
  for (const hidden of ['run_sql', 'list_resources', 'describe_resource', 'run_code(', 'bkn_start_interaction']) {
    assert.ok(!rc.description.includes(hidden), `the digest never lists ${hidden}`);
  }
  // bkn_context is required on both (capture enabled)
  for (const [name, args] of [['run_code', { code: 'print(1)' }], ['run_shell', { command: 'echo 1' }]]) {
    const r = await s.call(name, args);
    assert.equal(r.result.isError, true);
    assert.match(r.result.content[0].text, /conversation_required/);
  }
});

test('run_code: three business calls through the stub, only stdout returns, all recorded under the interaction', async () => {
  const s = await session(`${on.base}${PREFIX}/mcp/ptc`);
  const ctx = await startTurn(s);
  const code = [
    'nets = list_knowledge_networks()',
    'rows = query_object_instance(kn_id="kn_medical", ot_id="ot_drug", limit=2)',
    'detail = get_kn_detail(kn_id="kn_medical")',
    'ids = sorted(n.get("id") or n.get("kn_id") for n in (nets.get("entries") or nets.get("knowledge_networks") or []))',
    'print("networks:", len(ids) > 0, "rows:", len(rows["datas"]), "detail:", isinstance(detail, dict))',
    'open("result.txt", "w").write("rows=%d\\n" % len(rows["datas"]))',
  ].join('\n');
  const r = await s.call('run_code', { code, bkn_context: ctx, timeout: 60 });
  assert.equal(r.result.isError, false, JSON.stringify(r.result));
  const out = r.result.structuredContent;
  assert.equal(out.exit_code, 0, out.stderr);
  assert.equal(out.stdout, 'networks: True rows: 2 detail: True\n');
  assert.ok(!out.stdout.includes('datas'), 'intermediate results stay in the sandbox');

  const st = await traceState();
  const ops = st.operations.filter((o) => o.interaction_id === ctx.interaction_id);
  const names = ops.map((o) => o.tool_name).sort();
  assert.deepEqual(names, ['get_kn_detail', 'list_knowledge_networks', 'query_object_instance', 'run_code']);
  const run = ops.find((o) => o.tool_name === 'run_code');
  for (const o of ops.filter((x) => x !== run)) {
    assert.equal(o.conversation_id, ctx.conversation_id);
    if (o.parent_operation_id !== undefined) assert.equal(o.parent_operation_id, run.operation_id);
  }
  // the factory was called with the caller's own token
  const reqs = (await (await fetch(`${sim.base}/_sim/requests?service=operator_integration`)).json()).requests
    .filter((q) => q.path.endsWith('/v1/function/execute'));
  const last = reqs[reqs.length - 1];
  assert.equal(last.headers.authorization, `Bearer ${TOKEN}`);
  assert.equal(last.headers['x-account-id'], 'u_demo');
  const sent = JSON.parse(last.body);
  assert.equal(sent.language, 'python');
  assert.equal(sent.event.bkn.interaction_id, ctx.interaction_id);
  assert.ok(!last.body.includes(TOKEN), 'the token is never in the body');
  assert.ok(!sent.code.includes('def run_sql'), 'no SQL function in the stub');

  // run_shell: same conversation -> same directory
  const sh = await s.call('run_shell', { command: 'cat result.txt && ls', bkn_context: ctx });
  assert.equal(sh.result.isError, false, JSON.stringify(sh.result));
  assert.equal(sh.result.structuredContent.stdout, 'rows=2\nresult.txt\n');

  // another conversation does not see it
  const ctx2 = await startTurn(s);
  const sh2 = await s.call('run_shell', { command: 'ls result.txt', bkn_context: ctx2 });
  assert.equal(sh2.result.isError, true);
  const err = JSON.parse(sh2.result.content[0].text);
  assert.notEqual(err.exit_code, 0);
  assert.equal(err.code, 'nonzero_exit');

  // a failing script: isError with its stderr and exit code
  const boom = await s.call('run_code', { code: 'raise ValueError("no such drug")', bkn_context: ctx });
  assert.equal(boom.result.isError, true);
  const be = JSON.parse(boom.result.content[0].text);
  assert.equal(be.exit_code, 1);
  assert.match(be.stderr, /ValueError: no such drug/);
  // a failing business call raises ToolError in the script
  const te = await s.call('run_code', { code: 'try:\n    get_kn_detail(kn_id="kn_nope")\nexcept ToolError as e:\n    print("ToolError")', bkn_context: ctx });
  assert.equal(te.result.structuredContent.stdout, 'ToolError\n', JSON.stringify(te.result));
});

test('toolkit: tools without bkn_context, stub, digest == run_code description, deprecated alias byte-identical', async () => {
  const r = await get(`${on.base}${PREFIX}/mcp/ptc/toolkit`);
  assert.equal(r.status, 200);
  const body = await r.text();
  const kit = JSON.parse(body);
  assert.deepEqual(kit.tools.map((t) => t.name), ['run_code', 'run_shell']);
  for (const t of kit.tools) {
    assert.ok(!('bkn_context' in t.input_schema.properties), `${t.name}: no bkn_context`);
    assert.ok(!(t.input_schema.required || []).includes('bkn_context'));
  }
  assert.equal(kit.tools[0].language, 'python');
  assert.equal(kit.tools[1].language, 'shell');
  assert.equal(kit.digest, kit.tools[0].description);
  assert.match(kit.version, /^sha256:[0-9a-f]{64}$/);
  assert.equal(kit.sandbox_mcp_url, `${on.base}${PREFIX}/mcp/`);
  assert.match(kit.stub, /def query_object_instance\(kn_id: str, ot_id: str/);
  for (const hidden of ['run_sql', 'list_resources', 'describe_resource']) assert.ok(!kit.stub.includes(hidden), hidden);
  const s = await session(`${on.base}${PREFIX}/mcp/ptc`);
  const rc = (await s.list()).find((t) => t.name === 'run_code');
  assert.equal(rc.description, kit.digest);

  const dep = await get(`${on.base}${PREFIX}/mcp/toolkit`);
  assert.equal(dep.status, 200);
  assert.equal(await dep.text(), body, 'byte-identical');
  assert.equal(dep.headers.get('deprecation'), 'true');
  assert.equal(dep.headers.get('link'), `<${PREFIX}/mcp/ptc/toolkit>; rel="successor-version"`);
  assert.equal(r.headers.get('deprecation'), null);

  // localized per Accept-Language
  const en = await (await get(`${on.base}${PREFIX}/mcp/ptc/toolkit`, { 'accept-language': 'en-US' })).json();
  assert.notEqual(en.digest, kit.digest);
  assert.match(en.digest, /Write one Python script/);
  assert.equal((await get(`${on.base}${PREFIX}/mcp/ptc/toolkit`, { authorization: '' })).status, 401);
});

test('toolkit version changes when a tool is added by reload, and not otherwise', async () => {
  const url = `${on.base}${PREFIX}/mcp/ptc/toolkit`;
  const v1 = (await (await get(url)).json()).version;
  const reload = async () => {
    const r = await fetch(`${on.admin}/admin/reload`, { method: 'POST' });
    assert.ok(r.status === 200, await r.text());
  };
  await reload();
  assert.equal((await (await get(url)).json()).version, v1, 'same tools: same version');
  fs.writeFileSync(path.join(toolsDir, 'ptc_probe.lua'), `return {
    name = "ptc_probe", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "探针", ["en-US"] = "Probe" },
    description = { ["zh-CN"] = "PTC 探针", ["en-US"] = "PTC probe" },
    group = "query", order = 299, surfaces = { "mcp" }, formats = { "json" },
    input_schema = { type = "object", properties = { word = { type = "string" } } },
    handle = function(args) return { echo = args.word } end,
}
`);
  try {
    await reload();
    const kit = await (await get(url)).json();
    assert.notEqual(kit.version, v1, 'a new tool: a new version');
    assert.match(kit.stub, /def ptc_probe\(word: str = None\) -> dict:/);
    assert.match(kit.digest, /ptc_probe\(word: str = None\) -> dict/);
  } finally {
    fs.rmSync(path.join(toolsDir, 'ptc_probe.lua'));
    await reload();
  }
  assert.equal((await (await get(url)).json()).version, v1, 'removed again: the first version');
});

test('gate off: /mcp/ptc, /kn/execute_skill and execute_skill are absent; toolkit and info still answer', async () => {
  const unknown = await fetch(`${off.base}${PREFIX}/mcp/nope`, { method: 'POST', headers: headers(), body: '{}' });
  const unknownBody = await unknown.text();
  for (const p of ['/mcp/ptc', '/mcp/ptc/']) {
    const r = await fetch(`${off.base}${PREFIX}${p}`, { method: 'POST', headers: headers(), body: '{}' });
    assert.equal(r.status, unknown.status);
    assert.equal(r.status, 404);
    assert.equal(await r.text(), unknownBody, 'identical to an unknown path');
  }
  const kn = await fetch(`${off.base}${PREFIX}/kn/execute_skill`, { method: 'POST', headers: headers(), body: '{}' });
  const knUnknown = await fetch(`${off.base}${PREFIX}/kn/no_such_tool`, { method: 'POST', headers: headers(), body: '{}' });
  assert.equal(kn.status, 404);
  assert.equal(await kn.text(), await knUnknown.text());
  const s = await session(`${off.base}${PREFIX}/mcp`);
  assert.ok(!(await s.list()).some((t) => t.name === 'execute_skill'));
  const a = await s.call('execute_skill', {});
  const b = await s.call('no_such_tool', {});
  assert.deepEqual(a.error, { ...b.error, message: b.error.message.replace('no_such_tool', 'execute_skill') });

  const kit = await get(`${off.base}${PREFIX}/mcp/ptc/toolkit`);
  assert.equal(kit.status, 200);
  const k = await kit.json();
  assert.deepEqual(k.tools.map((t) => t.name), ['run_code', 'run_shell']);
  assert.ok(!k.stub.includes('def execute_skill'), 'gate off: no execute_skill function');
  const info = await get(`${off.base}${PREFIX}/mcp/ptc/info`);
  assert.notEqual(info.status, 404, 'info is not gated');
});
