// Execution factory (operator-integration) and bkn-safe authz routes of the simulator,
// over HTTP against an in-process simulator on 127.0.0.1:0 (closed in after()).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createSimulator } from './sim.mjs';
import { parse } from './lib/json.mjs';

let sim;
let base;
const OI = '/api/agent-operator-integration';
const USER = { 'x-account-id': 'u_demo', 'x-account-type': 'user', 'x-business-domain': 'bd_public' };

before(async () => {
  sim = createSimulator();
  await new Promise((r) => sim.server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${sim.server.address().port}`;
});
after(() => sim.close());

async function call(method, path, { body, headers = {} } = {}) {
  const init = { method, headers: { ...headers }, signal: AbortSignal.timeout(10000) };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(path.startsWith('http') ? path : base + path, init);
  const buf = Buffer.from(await res.arrayBuffer());
  const text = buf.toString('utf8');
  let value;
  try {
    value = parse(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, text, buf, json: value, headers: res.headers };
}
const get = (p, h = USER) => call('GET', OI + p, { headers: h });
const post = (p, body, h = USER) => call('POST', OI + p, { body, headers: h });

function envelope(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.json), ['error_code', 'description', 'solution', 'error_link', 'error_details']);
  if (code) assert.equal(r.json.error_code, code);
}

test('health lists the new services; internal routes need an account', async () => {
  const h = await call('GET', '/_sim/health');
  assert.ok(h.json.services.includes('operator_integration'));
  assert.ok(h.json.services.includes('vega'));
  envelope(await get('/internal-v1/skills/market', { 'x-business-domain': 'bd_public' }), 401);
  envelope(await get('/internal-v1/nope'), 404);
  envelope(await call('DELETE', `${OI}/internal-v1/skills/market`, { headers: USER }), 405);
});

test('skills market: business domain required, published and visible only, filters, paging', async () => {
  envelope(await get('/internal-v1/skills/market', { 'x-account-id': 'u_demo' }), 400, 'OperatorIntegration.Skill.InvalidParameter');
  const r = await get('/internal-v1/skills/market');
  assert.equal(r.status, 200);
  assert.deepEqual(Object.keys(r.json), ['total', 'page', 'page_size', 'total_pages', 'has_next', 'has_prev', 'data']);
  const ids = r.json.data.map((s) => s.skill_id);
  assert.ok(ids.includes('skill_contract_review') && ids.includes('skill_fx_report'));
  assert.ok(!ids.includes('skill_draft_memo'), 'unpublished skills are not in the market');
  assert.ok(!ids.includes('skill_hr_private'), 'skills the caller may not view are hidden');
  assert.ok(r.json.data.every((s) => s.status === 'published' && !('access' in s) && !('files' in s)));
  const other = await get('/internal-v1/skills/market', { ...USER, 'x-account-id': 'u_other' });
  assert.ok(other.json.data.some((s) => s.skill_id === 'skill_hr_private'));
  const legal = await get('/internal-v1/skills/market?category=legal&name=%E5%90%88%E5%90%8C');
  assert.deepEqual(legal.json.data.map((s) => s.skill_id), ['skill_contract_review']);
  const p2 = await get('/internal-v1/skills/market?page=2&page_size=2');
  assert.equal(p2.json.page, 2);
  assert.equal(p2.json.data.length, 2);
  assert.equal(p2.json.has_prev, true);
  assert.equal(p2.json.total, r.json.total);
  envelope(await get('/internal-v1/skills/market?page=x'), 400);
});

test('skill content: presigned URL served without headers; 403, 404; tampered and binary assets', async () => {
  const r = await get('/internal-v1/skills/skill_contract_review/content');
  assert.equal(r.status, 200);
  assert.deepEqual(Object.keys(r.json), ['skill_id', 'url', 'status', 'files']);
  assert.deepEqual(r.json.files.map((f) => f.rel_path), ['SKILL.md', 'refs/checklist.md', 'main.py']);
  assert.ok(r.json.files.every((f) => Number.isInteger(f.size) && f.size > 0 && f.mime_type && f.file_type));
  const md = await call('GET', r.json.url); // no headers at all
  assert.equal(md.status, 200);
  assert.match(md.headers.get('content-type'), /^text\/markdown/);
  assert.match(md.text, /^---\nname: 合同审查/);
  // Tamper with the signature's first digit (a fixed replacement would be a no-op for
  // the 1 in 16 signatures that already start with it).
  const bad = await call('GET', r.json.url.replace(/X-Signature=(.)/, (_, d) => `X-Signature=${d === '0' ? '1' : '0'}`));
  envelope(bad, 403, 'Sim.PresignedURL.SignatureMismatch');
  const big = await get('/internal-v1/skills/skill_clause_extract/content');
  const bigMd = await call('GET', big.json.url);
  assert.ok([...bigMd.text].length > 40000, 'a SKILL.md long enough to be truncated by the gateway');
  assert.equal(big.json.files[0].size, bigMd.buf.length);
  envelope(await get('/internal-v1/skills/skill_hr_private/content'), 403, 'Public.Forbidden');
  envelope(await get('/internal-v1/skills/skill_nope/content'), 404, 'OperatorIntegration.Skill.NotFound');
});

test('skill file read: rel_path, traversal refused, binary file, 404', async () => {
  const ok = await post('/internal-v1/skills/skill_contract_review/files/read', { rel_path: 'refs/checklist.md' });
  assert.equal(ok.status, 200);
  assert.deepEqual(Object.keys(ok.json), ['skill_id', 'rel_path', 'url', 'mime_type', 'file_type']);
  const f = await call('GET', ok.json.url);
  assert.match(f.text, /审查清单/);
  const dot = await post('/internal-v1/skills/skill_contract_review/files/read', { rel_path: './refs//checklist.md' });
  assert.equal(dot.json.rel_path, 'refs/checklist.md');
  for (const p of ['../skill_fx_report/SKILL.md', 'refs/../../x', '/etc/passwd', 'refs\\..\\SKILL.md', '..', 'a/\u0000b']) {
    envelope(await post('/internal-v1/skills/skill_contract_review/files/read', { rel_path: p }), 400, 'OperatorIntegration.Skill.InvalidRelPath');
  }
  envelope(await post('/internal-v1/skills/skill_contract_review/files/read', { path: 'SKILL.md' }), 400, 'OperatorIntegration.Skill.InvalidParameter');
  envelope(await post('/internal-v1/skills/skill_contract_review/files/read', '{'), 400);
  envelope(await post('/internal-v1/skills/skill_contract_review/files/read', { rel_path: 'missing.md' }), 404);
  const png = await post('/internal-v1/skills/skill_fx_report/files/read', { rel_path: 'assets/chart.png' });
  assert.equal(png.json.mime_type, 'image/png');
  const bin = await call('GET', png.json.url);
  assert.equal(bin.headers.get('content-type'), 'image/png');
  assert.deepEqual([...bin.buf.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
});

test('skill execute: declared entry, deterministic output, non-zero exit, grants, validation', async () => {
  const path = '/internal-v1/skills/skill_contract_review/execute';
  const r = await post(path, { entry_shell: 'python main.py --input contract.txt', timeout: 30 });
  assert.equal(r.status, 200);
  assert.deepEqual(Object.keys(r.json), ['skill_id', 'session_id', 'work_dir', 'file_name', 'uploaded_path', 'command',
    'exit_code', 'stdout', 'stderr', 'execution_time', 'mocked']);
  assert.equal(r.json.exit_code, 0);
  assert.match(r.json.stdout, /发现 2 个风险点/);
  const again = await post(path, { entry_shell: 'python main.py --input contract.txt' });
  assert.equal(again.text, r.text, 'deterministic');
  const fail = await post(path, { entry_shell: 'python main.py --strict' });
  assert.equal(fail.status, 200);
  assert.equal(fail.json.exit_code, 2);
  envelope(await post(path, { entry_shell: 'rm -rf /' }), 400, 'OperatorIntegration.Skill.InvalidEntry');
  envelope(await post(path, {}), 400);
  envelope(await post(path, { entry_shell: 'python main.py --input contract.txt', timeout: 601 }), 400);
  envelope(await post('/internal-v1/skills/skill_view_only/execute', { entry_shell: 'python explain.py' }), 403, 'Public.Forbidden');
  envelope(await post('/internal-v1/skills/skill_draft_memo/execute', { entry_shell: 'x' }), 400);
});

test('tool detail: full view, refused view with a reason, managed proxy account reads schemas only', async () => {
  const full = await get('/internal-v1/tool-box/box_medical_tools/tool/tool_treatment_plan');
  assert.equal(full.status, 200);
  assert.equal(full.json.name, 'generate_treatment_plan');
  assert.equal(full.json.metadata.server_url, 'http://treatment-svc.openbkn:8080');
  assert.ok(full.json.metadata.api_spec.responses[0].content['application/json'].schema.$ref);
  assert.ok(full.json.metadata.api_spec.components.schemas.TreatmentPlan);

  const refused = await get('/internal-v1/tool-box/box_k8s_tools/tool/tool_scale_deployment');
  envelope(refused, 403, 'Public.Forbidden');
  assert.match(refused.json.error_details, /view was not granted for tool_box:box_k8s_tools/);

  const proxy = { 'x-account-id': 'kn-proxy-kn_ops', 'x-account-type': 'app' };
  const reduced = await get('/internal-v1/tool-box/box_k8s_tools/tool/tool_scale_deployment', proxy);
  assert.equal(reduced.status, 200);
  assert.deepEqual(Object.keys(reduced.json), ['tool_id', 'name', 'description', 'status', 'metadata_type', 'metadata']);
  assert.deepEqual(Object.keys(reduced.json.metadata), ['version', 'summary', 'description', 'api_spec']);
  assert.ok(!/server_url|ops-runner|def handler|"code"/.test(reduced.text), 'no service address, no source');
  assert.ok(reduced.json.metadata.api_spec.request_body.content['application/json'].schema.properties.replicas);
  assert.ok(reduced.json.metadata.api_spec.responses[0].content['application/json'].schema.properties.scaled);

  const admin = await get('/internal-v1/tool-box/box_k8s_tools/tool/tool_scale_deployment', { 'x-account-id': 'u_admin' });
  assert.match(admin.json.metadata.code, /def handler/);
  envelope(await get('/internal-v1/tool-box/box_legacy/tool/tool_old_report', proxy), 403, 'Public.Forbidden');
  envelope(await get('/internal-v1/tool-box/box_nope/tool/x'), 404, 'OperatorIntegration.ToolBox.NotFound');
  envelope(await get('/internal-v1/tool-box/box_finance/tool/nope'), 404, 'OperatorIntegration.Tool.NotFound');
});

test('tool catalogue: Bearer and trusted-header faces, status filter, paging, refusals', async () => {
  const bearer = { authorization: 'Bearer demo-user-token' };
  const pub = await get('/v1/tool-box/box_finance/tools/list?status=enabled&page=1&page_size=100', bearer);
  assert.equal(pub.status, 200);
  assert.equal(pub.json.box_id, 'box_finance');
  assert.deepEqual(pub.json.tools.map((t) => t.tool_id), ['tool_fx_convert', 'tool_expedite_order']);
  const fx = pub.json.tools[0];
  assert.deepEqual(Object.keys(fx), ['tool_id', 'name', 'description', 'status', 'use_rule', 'metadata_type', 'metadata']);
  assert.deepEqual(Object.keys(fx.metadata), ['api_spec']);
  const all = await get('/internal-v1/caller/tool-box/box_finance/tools/list');
  assert.equal(all.json.tools.length, 3, 'no status filter lists disabled tools too');
  const paged = await get('/internal-v1/caller/tool-box/box_finance/tools/list?page=2&page_size=2');
  assert.deepEqual(paged.json.tools.map((t) => t.tool_id), ['tool_fx_rates_legacy']);
  const legacy = await get('/internal-v1/caller/tool-box/box_legacy/tools/list?status=enabled');
  assert.deepEqual(legacy.json.tools, [], 'an unpublished box offers nothing');
  envelope(await get('/v1/tool-box/box_finance/tools/list', {}), 401);
  envelope(await get('/v1/tool-box/box_finance/tools/list', { authorization: 'Bearer bogus' }), 401);
  envelope(await get('/v1/tool-box/box_k8s_tools/tools/list', bearer), 403);
  envelope(await get('/internal-v1/caller/tool-box/box_finance/tools/list?page_size=101'), 400);
  const life = await get('/internal-v1/tool-box/box_legacy');
  assert.equal(life.json.status, 'unpublished');
  assert.deepEqual(life.json.tools, [{ tool_id: 'tool_old_report', name: 'old_report', status: 'enabled' }]);
});

test('toolbox proxy: {"body": args} on all three faces, function errors are 200, refusals', async () => {
  const args = { body: { amount: 100, from: 'USD', to: 'CNY' } };
  const pub = await post('/v1/tool-box/box_finance/proxy/tool_fx_convert', args, { authorization: 'Bearer demo-user-token', 'bkn-parent-operation-id': 'op_1' });
  assert.equal(pub.status, 200, pub.text);
  assert.deepEqual(pub.json, { amount: 100, from: 'USD', to: 'CNY', rate: 7.18, converted: 718 });
  const caller = await post('/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_convert', args);
  assert.equal(caller.text, pub.text);
  const managed = await post('/internal-v1/tool-box/box_k8s_tools/proxy/tool_scale_deployment', { body: { pod_name: 'web-1', replicas: 3 } }, { 'x-account-id': 'kn-proxy-kn_ops' });
  assert.deepEqual(managed.json, { scaled: true, pod_name: 'web-1', replicas: 3 });
  const own = await post('/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_convert', { body: { amount: 1, from: 'XYZ', to: 'CNY' } });
  assert.equal(own.status, 200);
  assert.deepEqual(own.json, { error: 'unsupported currency XYZ' });
  const bare = await post('/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_convert', { amount: 1, from: 'USD', to: 'CNY' });
  envelope(bare, 400, 'OperatorIntegration.Proxy.InvalidParameter');
  assert.match(bare.json.error_details, /"body"/);
  envelope(await post('/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_rates_legacy', { body: {} }), 400, 'OperatorIntegration.Tool.NotExecutable');
  envelope(await post('/internal-v1/caller/tool-box/box_k8s_tools/proxy/tool_scale_deployment', { body: {} }), 403);
  envelope(await post('/v1/tool-box/box_finance/proxy/tool_fx_convert', args, {}), 401);
  const rec = await call('GET', '/_sim/requests?service=operator_integration');
  assert.ok(rec.json.requests.some((q) => q.headers['bkn-parent-operation-id'] === 'op_1'));
});

test('MCP: tool list, proxy call, tool errors in the result, unpublished and unknown', async () => {
  const list = await get('/internal-v1/mcp/proxy/mcp_k8s_ops/tools');
  assert.equal(list.status, 200);
  assert.deepEqual(list.json.tools.map((t) => t.name), ['restart_pod', 'get_pod_logs']);
  assert.deepEqual(Object.keys(list.json.tools[0]), ['name', 'description', 'inputSchema', 'annotations']);
  assert.ok(list.json.tools[0].inputSchema.$defs.GracePeriod, 'a $defs reference to inline');
  const call1 = await post('/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call', { tool_name: 'restart_pod', parameters: { pod_name: 'web-1', grace_period_seconds: 30 } });
  assert.equal(call1.status, 200);
  assert.equal(call1.json.isError, false);
  assert.match(call1.json.content[0].text, /pod default\/web-1 restarted/);
  assert.deepEqual(call1.json.structuredContent, { restarted: true, pod_name: 'web-1', namespace: 'default' });
  const logs = await post('/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call', { tool_name: 'get_pod_logs', parameters: { pod_name: 'web-1', tail_lines: 2 } });
  assert.equal(logs.json.content[0].text.split('\n').length, 2);
  const toolErr = await post('/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call', { tool_name: 'get_pod_logs' });
  assert.equal(toolErr.status, 200);
  assert.equal(toolErr.json.isError, true);
  envelope(await post('/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call', { parameters: {} }), 400);
  envelope(await post('/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call', { tool_name: 'nope' }), 404, 'OperatorIntegration.MCP.ToolNotFound');
  envelope(await post('/internal-v1/mcp/proxy/mcp_legacy/tool/call', { tool_name: 'ping' }), 400, 'OperatorIntegration.MCP.NotPublished');
  envelope(await get('/internal-v1/mcp/proxy/mcp_nope/tools'), 404, 'OperatorIntegration.MCP.NotFound');
  const life = await get('/internal-v1/mcp/mcp_legacy');
  assert.equal(life.json.status, 'unpublished');
});

test('capabilities search: refs only, listing order, query ranking, filters, top_k, validation', async () => {
  const refs = [
    { capability_type: 'function', owner_id: 'box_finance', capability_id: 'tool_fx_convert' },
    { capability_type: 'function', owner_id: 'box_finance', capability_id: 'tool_expedite_order' },
    { capability_type: 'skill', owner_id: '', capability_id: 'skill_fx_report' },
    { capability_type: 'mcp_tool', owner_id: 'mcp_k8s_ops', capability_id: 'get_pod_logs' },
    { capability_type: 'function', owner_id: 'box_finance', capability_id: 'tool_missing' },
  ];
  const path = '/internal-v1/capabilities/search';
  const listing = await post(path, { query: '', refs, top_k: 10 });
  assert.equal(listing.status, 200);
  assert.deepEqual(listing.json.entries.map((e) => e.capability_id), ['tool_fx_convert', 'tool_expedite_order', 'skill_fx_report', 'get_pod_logs']);
  assert.deepEqual(Object.keys(listing.json.entries[0]), ['capability_type', 'owner_id', 'capability_id', 'metadata_type', 'name', 'description', 'matched_by', 'score']);
  assert.ok(!('metadata_type' in listing.json.entries[2]), 'skills carry no metadata_type');
  const fx = await post(path, { query: '汇率 fx', refs, top_k: 10 });
  assert.equal(fx.json.entries[0].matched_by, 'keyword');
  assert.ok(fx.json.entries.every((e) => e.score > 0));
  assert.ok(fx.json.entries.map((e) => e.capability_id).includes('skill_fx_report'));
  assert.ok(!fx.json.entries.some((e) => e.capability_id === 'get_pod_logs'));
  const onlySkills = await post(path, { refs, top_k: 10, types: ['skill'] });
  assert.deepEqual(onlySkills.json.entries.map((e) => e.capability_id), ['skill_fx_report']);
  const openapi = await post(path, { refs, top_k: 10, metadata_types: ['openapi'] });
  assert.deepEqual(openapi.json.entries.map((e) => e.capability_id), ['tool_fx_convert', 'tool_expedite_order']);
  const top = await post(path, { refs, top_k: 2 });
  assert.equal(top.json.entries.length, 2);
  assert.deepEqual((await post(path, { query: 'fx', top_k: 5 })).json, { entries: [] }, 'no refs: nothing (fail-closed)');
  envelope(await post(path, { refs: [{ capability_type: 'bogus', capability_id: 'x' }] }), 400);
  envelope(await post(path, { refs, top_k: 0 }), 400);
  envelope(await post(path, { refs, types: ['tool'] }), 400);
});

test('function execute (PTC): real python and sh, work dir per work_dir, limits, Bearer and execute grant', async () => {
  const bearer = { authorization: 'Bearer demo-user-token', 'x-account-id': 'u_demo' };
  const py = await post('/v1/function/execute', {
    code: 'import os\ndef helper():\n    print("stub noise")\n\ndef handler(event):\n    print("hello", event["bkn"]["conversation_id"])\n    print(\'世界\')\n'
      + '    print(os.environ["BKN_TOKEN"], os.environ["BKN_MCP_URL"])\n    open("note.txt", "w").write("from python\\n")\n',
    language: 'python', event: { bkn: { conversation_id: 'c1' }, mcp: 'http://127.0.0.1:1/mcp/' }, timeout: 60, work_dir: 'conv-c1',
  }, bearer);
  assert.equal(py.status, 200, py.text);
  assert.deepEqual(py.json, { stdout: 'hello c1\n世界\ndemo-user-token http://127.0.0.1:1/mcp/\n', stderr: '', exit_code: 0 });
  const same = await post('/v1/function/execute', { code: 'cat note.txt; ls', language: 'shell', work_dir: 'conv-c1' }, bearer);
  assert.deepEqual(same.json, { stdout: 'from python\nnote.txt\n', stderr: '', exit_code: 0 }, 'same work_dir: the file is there');
  const other = await post('/v1/function/execute', { code: 'ls note.txt', language: 'shell', work_dir: 'conv-c2' }, bearer);
  assert.notEqual(other.json.exit_code, 0, 'another work_dir does not see it');
  const boom = await post('/v1/function/execute', { code: 'raise ValueError("bad")', language: 'python' }, bearer);
  assert.equal(boom.json.exit_code, 1);
  assert.match(boom.json.stderr, /ValueError: bad/);
  const sh = await post('/v1/function/execute', { code: 'echo "hi there"\nexit 3', language: 'shell' }, bearer);
  assert.deepEqual(sh.json, { stdout: 'hi there\n', stderr: '', exit_code: 3 });
  const slow = await post('/v1/function/execute', { code: 'sleep 30 & echo $!; sleep 30; echo never', language: 'shell', timeout: 1 }, bearer);
  assert.equal(slow.json.exit_code, 124, slow.text);
  assert.match(slow.json.stderr, /time limit/);
  // the whole process group is killed at the limit: the background sleep is gone too
  // (judged on the process, not on the time)
  const bg = Number(slow.json.stdout.trim());
  assert.ok(Number.isInteger(bg) && bg > 0, slow.text);
  const alive = () => {
    try { return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${bg}/stat`, 'utf8')); } catch { return false; }
  };
  for (let i = 0; i < 100 && alive(); i++) await new Promise((r) => setTimeout(r, 50)); // reaping (liveness only)
  assert.ok(!alive(), 'the background process outlived the limit');
  const big = await post('/v1/function/execute', { code: 'print("x" * (3 << 20))', language: 'python' }, bearer);
  assert.equal(big.json.truncated, true);
  assert.equal(big.json.stdout.length, 1 << 20);
  envelope(await post('/v1/function/execute', { code: 'print(1)', language: 'python' }, {}), 401);
  envelope(await post('/v1/function/execute', { code: '', language: 'python' }, bearer), 400);
  envelope(await post('/v1/function/execute', { code: 'x', language: 'ruby' }, bearer), 400);
  envelope(await post('/v1/function/execute', { code: 'x', language: 'shell', timeout: 0 }, bearer), 400);
  envelope(await post('/v1/function/execute', { code: 'x', language: 'shell', work_dir: '../up' }, bearer), 400);
  envelope(await post('/v1/function/execute', { code: 'x', language: 'shell' }, { authorization: 'Bearer demo-user2-token' }), 403);
});

test('faults apply to operator_integration', async () => {
  const f = await call('POST', '/_sim/faults', { body: { service: 'operator_integration', status: 503, count: 1 } });
  assert.equal(f.status, 200, f.text);
  envelope(await get('/internal-v1/skills/market'), 503, 'Sim.InjectedFault');
  assert.equal((await get('/internal-v1/skills/market')).status, 200);
  await call('POST', '/_sim/reset');
});

test('bkn-safe resource-filter and checks', async () => {
  const rf = (body) => call('POST', '/api/safe/v1/authz/resource-filter', { body, headers: { 'x-account-id': 'u_demo' } });
  const resources = [
    { type: 'object_type', id: 'kn_medical/ot_patient' },
    { type: 'object_type', id: 'kn_medical/ot_drug' },
    { type: 'object_type', id: 'kn_medical/ot_nope' },
    { type: 'object_type', id: 'kn_medical/ot_drug' },
  ];
  const demo = await rf({ accessor_id: 'u_demo', resources, visibility_operations: ['query_data'], candidate_operations: ['query_data'] });
  assert.equal(demo.status, 200);
  assert.deepEqual(demo.json, { resources: [
    { resource_type: 'object_type', resource_id: 'kn_medical/ot_patient', operations: ['query_data'] },
    { resource_type: 'object_type', resource_id: 'kn_medical/ot_drug', operations: ['query_data'] },
  ] });
  const other = await rf({ accessor_id: 'u_other', resources, visibility_operations: ['query_data'], candidate_operations: ['query_data'] });
  assert.deepEqual(other.json.resources.map((r) => r.resource_id), ['kn_medical/ot_drug']);
  envelope(await rf({ accessor_id: 'u_demo' }), 400, 'BknSafe.Authz.InvalidParameter');

  const checks = await call('POST', '/api/safe/v1/authz/checks', {
    headers: { 'x-account-id': 'u_demo' },
    body: { checks: [
      { resource: { type: 'knowledge_network', id: 'kn_medical' }, operation: 'view_detail' },
      { resource: { type: 'knowledge_network', id: 'kn_medical' }, operation: 'delete' },
      { resource_type: 'tool_box', resource_id: 'box_k8s_tools', operation: 'view' },
      { resource_type: 'skill', resource_id: 'skill_contract_review', operation: 'execute' },
      { resource_type: 'resource', resource_id: 'res_payroll', operation: 'query_data' },
      { resource_type: 'object_type', resource_id: 'kn_medical/ot_patient', operation: 'query_data' },
    ] },
  });
  assert.equal(checks.status, 200, checks.text);
  assert.deepEqual(checks.json.results.map((r) => r.allowed), [true, false, false, true, false, true]);
  assert.deepEqual(Object.keys(checks.json.results[0]), ['resource_type', 'resource_id', 'operation', 'allowed']);
  envelope(await call('POST', '/api/safe/v1/authz/checks', { body: { checks: [] }, headers: { 'x-account-id': 'u_demo' } }), 400);
  // AppKey introspection still works.
  const intro = await call('POST', '/api/safe/v1/api-keys/introspect', { body: { token: 'bak_demo_appkey' } });
  assert.equal(intro.json.active, true);
});
