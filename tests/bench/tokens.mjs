// tokens.mjs: what the model pays, in o200k tokens (gpt-tokenizer), for each business
// tool's MCP reply on the demo data, and for tools/list of /mcp and /mcp-compact in both
// languages. Run by tokens.sh.
//
// For every business tool's typical call (at 10 and 100 rows where it pages; the two
// action tools execute_action and get_action_execution on a run it starts; the gateway
// tools search_instance, explore_subgraph, query_metric and find_skills through
// execute_tool), on /mcp and again on /mcp-compact through execute_tool, it counts:
//   json  the compact JSON result (the text block of response_format "json");
//   ours  the MCP default text block, exactly as the server sends it (TOON);
//   ref   the reference encoder's TOON of the same JSON result (@toon-format/toon 2.3.1).
// The 100-row case needs more ot_drug rows than the demo's 22: the script starts the
// simulator on a copy of tests/platform/data whose ot_drug holds 120 generated rows
// shaped like the demo's (SIM_DATA_DIR). The table goes to stdout and to
// build/bench/tokens-results.txt. It fails when a call fails, when any MCP text costs
// more tokens than its compact JSON (the token rule, on both surfaces, execute_tool
// included), or when query_object_instance's text costs more than 0.70 of its JSON.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startSimulator, startServer, ROOT, PREFIX } from '../integration/lib/stack.mjs';

const bench = process.argv[2] || path.join(ROOT, 'build/bench');
const mod = (p) => import(pathToFileURL(path.join(bench, 'node_modules', p)).href);
const { encode } = await mod('@toon-format/toon/dist/index.mjs');
const tokenizer = await mod('gpt-tokenizer/esm/encoding/o200k_base.js').catch(() => mod('gpt-tokenizer/esm/main.js'));
const count = (s) => tokenizer.countTokens ? tokenizer.countTokens(s) : tokenizer.encode(s).length;

// ---- a larger dataset: ot_drug grows to 120 rows in the demo's shape
const DRUG_ROWS = 120;
function generateData() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-tokens-'));
  const src = path.join(ROOT, 'tests/platform/data');
  fs.cpSync(src, dir, { recursive: true });
  const file = path.join(dir, 'kn_medical.json');
  const text = fs.readFileSync(file, 'utf8');
  const TAGS = [[], ['处方药'], ['非处方药', 'OTC'], ['医保甲类'], ['处方药', '医保乙类']];
  const EXT = [{}, { storage: '常温', spec: '0.1g*24' }, { storage: '阴凉' }, {}, { spec: '10mg*30', recall: false }];
  const STATUS = ['on_market', 'on_market', 'suspended', 'on_market', 'withdrawn'];
  const NAMES = ['阿托伐他汀钙片', '二甲双胍缓释片', '头孢克肟分散片', '奥美拉唑肠溶胶囊', '氯雷他定片', '缬沙坦胶囊', '蒙脱石散'];
  const rows = [];
  for (let i = 0; i < DRUG_ROWS; i++) {
    const m = String(1 + (i % 9)).padStart(6, '0');
    rows.push(`{"drug_id":${5001 + i},"name":${JSON.stringify(`${NAMES[i % NAMES.length]}${i}`)},"status":"${STATUS[i % 5]}",` +
      `"approval_date":"20${String(10 + (i % 15)).padStart(2, '0')}-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + (i % 28)).padStart(2, '0')}",` +
      `"manufacturer_id":"mfr_${m}","batch_no":${i % 3 === 0 ? `1234567890123456789${String(i).padStart(4, '0')}` : 20250000 + i},` +
      `"tags":${JSON.stringify(TAGS[i % 5])},"ext":${JSON.stringify(EXT[i % 5])}}`);
  }
  // the instances of ot_drug: replace the demo's array by the generated one
  const key = '"ot_drug":';
  const at = text.indexOf(key, text.indexOf('"instances"'));
  let i = text.indexOf('[', at);
  let depth = 0;
  let end = i;
  for (; end < text.length; end++) {
    const c = text[end];
    if (c === '"') { end++; while (text[end] !== '"') { if (text[end] === '\\') end++; end++; } continue; }
    if (c === '[') depth++;
    if (c === ']' && --depth === 0) break;
  }
  fs.writeFileSync(file, `${text.slice(0, i)}[${rows.join(',')}]${text.slice(end + 1)}`);
  return dir;
}

// drugs and their manufacturers, `limit` drugs
const SUBGRAPH = (limit) => [{
  object_types: [{ id: 'ot_drug', limit }, { id: 'ot_manufacturer' }],
  relation_types: [{ relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' }],
}];
// Each business tool's typical call on the demo data.
const CASES = [
  ['list_knowledge_networks', {}],
  ['get_kn_detail', { kn_id: 'kn_medical' }],
  ['search_schema', { kn_id: 'kn_medical', query: 'drug manufacturer' }],
  ['get_object_types', { kn_id: 'kn_medical', ids: ['ot_drug'] }],
  ['get_relation_types', { kn_id: 'kn_medical', ids: ['rt_produced_by'] }],
  ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 10 }, '10 rows'],
  ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 100 }, '100 rows'],
  ['query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: SUBGRAPH(10) }, 'limit 10'],
  ['query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: SUBGRAPH(100) }, 'limit 100'],
  ['get_logic_properties_values', { kn_id: 'kn_medical', ot_id: 'ot_company', query: 'approved drug count', _instance_identities: [{ company_id: 'company_000001' }], properties: ['approved_drug_count'] }],
  ['get_action_info', { kn_id: 'kn_medical', at_id: 'at_generate_treatment_plan' }],
  ['execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: 1 } }],
  ['get_action_execution', { kn_id: 'kn_ops', execution_id: '<the run execute_action started>' }],
  ['list_action_executions', { kn_id: 'kn_ops', limit: 10 }],
  ['search_capabilities', { kn_id: 'kn_medical', limit: 10 }],
  ['list_skills', {}],
  ['get_skill_content', { skill_id: 'skill_contract_review' }],
  ['read_skill_file', { skill_id: 'skill_contract_review', rel_path: 'refs/checklist.md' }],
  // the gateway tools: no tools/list shows them; execute_tool runs them
  ['search_instance', { kn_id: 'kn_medical', query: '阿司匹林 布洛芬 胶囊' }, 'gateway'],
  ['explore_subgraph', { kn_id: 'kn_medical', source_object_type_id: 'ot_drug', direction: 'forward', path_length: 1 }, 'gateway'],
  ['query_metric', { kn_id: 'kn_medical', metric_id: 'metric_adverse_event_count', analysis_dimensions: ['severity'], time: { start: 1735660800, end: 1743436800, step: 'month' } }, 'gateway'],
  ['find_skills', { kn_id: 'kn_medical', object_type_id: 'ot_drug' }, 'gateway'],
];

const dataDir = generateData();
process.env.SIM_DATA_DIR = dataDir; // the simulator inherits the environment
const sim = await startSimulator({ capture: 'disabled' }).catch((e) => { throw e; });
let server;
const rows = [];
const failures = [];
try {
  server = await startServer(sim.base);
  const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token' };
  const rpc = async (url, method, params, headers = H) => {
    const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), signal: AbortSignal.timeout(30000) });
    return { headers: r.headers, body: await r.json() };
  };
  const session = async (url, headers = H) => {
    const r = await rpc(url, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tokens', version: '1' } }, headers);
    return { ...headers, 'mcp-session-id': r.headers.get('mcp-session-id') };
  };
  const mcp = await session(server.mcpUrl);
  const compactUrl = `${server.base}${PREFIX}/mcp-compact`;
  const compact = await session(compactUrl);
  let run; // the execution execute_action started
  for (const surface of ['/mcp', '/mcp-compact']) {
    for (const [tool, args0, label] of CASES) {
      const gateway = label === 'gateway';
      const args = tool === 'get_action_execution' ? { ...args0, execution_id: run } : args0;
      // /mcp: the tool itself (gateway tools through execute_tool); /mcp-compact: every
      // tool through execute_tool
      const via = gateway || surface === '/mcp-compact';
      const call = async (a) => {
        const { response_format: rf, ...inner } = a;
        const params = via
          ? { name: 'execute_tool', arguments: { tool_id: tool, arguments: inner, ...(rf ? { response_format: rf } : {}) } }
          : { name: tool, arguments: a };
        return surface === '/mcp' ? (await rpc(server.mcpUrl, 'tools/call', params, mcp)).body.result
          : (await rpc(compactUrl, 'tools/call', params, compact)).body.result;
      };
      const toon = await call(args);
      const json = await call({ ...args, response_format: 'json' });
      if (!toon || toon.isError || !json || json.isError) {
        failures.push(`${surface} ${tool} ${label || ''}: ${JSON.stringify(toon || json).slice(0, 200)}`);
        continue;
      }
      if (tool === 'execute_action' && !run) run = json.structuredContent?.execution_id;
      // execute_action starts a new run each call (a new random id) and the run that
      // get_action_execution reads moves on between two calls: their JSON is that of the
      // same call's result, not of the second call
      const moving = tool === 'execute_action' || tool === 'get_action_execution';
      const jsonText = moving ? JSON.stringify(toon.structuredContent) : json.content[0].text;
      const ours = toon.content[0].text;
      const ref = encode(JSON.parse(jsonText));
      const sc = json.structuredContent ?? {};
      const n = Array.isArray(sc.datas) ? sc.datas.length
        : Array.isArray(sc.nodes) ? sc.nodes.length
        : Array.isArray(sc.relation_paths) ? sc.relation_paths.length
        : tool === 'query_instance_subgraph' ? Object.keys(sc.entries?.[0]?.objects ?? {}).length
          : Array.isArray(sc.entries) ? sc.entries.length : '';
      const name = `${surface} ${via ? 'execute_tool: ' : ''}${tool}${label && !gateway ? ` (${label})` : ''}`;
      const row = { name, n, json: count(jsonText), ours: count(ours), ref: count(ref), kind: ours === jsonText ? ' (JSON)' : '' };
      rows.push(row);
      // the token rule: the MCP text never costs more than the compact JSON
      if (row.ours > row.json) failures.push(`${row.name}: MCP text ${row.ours} > compact JSON ${row.json} tokens`);
      if (tool === 'query_object_instance' && row.ours > 0.70 * row.json) failures.push(`${row.name}: MCP text ${row.ours} > 0.70 x compact JSON ${row.json} tokens`);
    }
  }
  // tools/list on both endpoints in both languages (the deployment's zh-CN, and en-US
  // by Accept-Language), the JSON-RPC result as the client receives it
  const LANGS = ['zh-CN', 'en-US'];
  const lists = [];
  for (const ep of ['mcp', 'mcp-compact']) {
    const url = `${server.base}${PREFIX}/${ep}`;
    const l = { ep: `/${ep}`, bytes: {}, tokens: {} };
    for (const lang of LANGS) {
      const h = await session(url, { ...H, 'accept-language': lang });
      const r = await rpc(url, 'tools/list', {}, h);
      const text = JSON.stringify(r.body.result);
      l.tools = r.body.result.tools.length;
      l.bytes[lang] = Buffer.byteLength(text);
      l.tokens[lang] = count(text);
    }
    lists.push(l);
  }

  const pct = (a, b) => `${a <= b ? '' : '+'}${Math.round(((a - b) / b) * 100)}%`;
  const out = [];
  out.push('| tool call | rows | compact JSON | our TOON (MCP text) | ours/JSON | reference TOON | ref/JSON |');
  out.push('|---|--:|--:|--:|--:|--:|--:|');
  for (const r of rows) out.push(`| ${r.name} | ${r.n} | ${r.json} | ${r.ours}${r.kind} | ${pct(r.ours, r.json)} | ${r.ref} | ${pct(r.ref, r.json)} |`);
  out.push('');
  out.push('| tools/list | tools | bytes zh-CN | bytes en-US | tokens zh-CN | tokens en-US |');
  out.push('|---|--:|--:|--:|--:|--:|');
  for (const l of lists) out.push(`| ${l.ep} | ${l.tools} | ${LANGS.map((g) => l.bytes[g]).join(' | ')} | ${LANGS.map((g) => l.tokens[g]).join(' | ')} |`);
  out.push('');
  for (const g of LANGS) out.push(`/mcp-compact / /mcp tools/list tokens, ${g}: ${(lists[1].tokens[g] / lists[0].tokens[g]).toFixed(3)}`);
  for (const f of failures) out.push(`!! failed: ${f}`);
  const text = out.join('\n');
  console.log(text);
  fs.mkdirSync(bench, { recursive: true });
  fs.writeFileSync(path.join(bench, 'tokens-results.txt'), `${text}\n`);
} finally {
  if (server) await server.stop();
  await sim.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
if (failures.length) process.exit(1);
