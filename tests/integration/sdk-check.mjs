// Drives the official TypeScript SDK client (../shared/checks/sdk-client.mjs,
// installed into build/ext) against the server: initialize, tools/list, and a
// query_object_instance call whose text block must carry the simulator's big
// integers, [] and {} byte for byte. Run through run-with-stack.mjs.
//
// sdk-check.mjs <ext> [compact]: with "compact" the same against /mcp-compact, plus one
// call of each listed business tool that has an outputSchema and runs on the demo data
// without side effects: the SDK checks every structuredContent against the outputSchema
// that surface lists (there a shallow view of the tool's).
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ext = process.argv[2];
const compact = process.argv[3] === 'compact';
const url = compact ? `${process.env.MCP_URL}-compact` : process.env.MCP_URL;
const fail = (m) => { console.error(`FAIL: ${m}`); process.exit(1); };

function sdkCall(tool, args) {
  const r = spawnSync(process.execPath, [path.join(ext, 'sdk-client.mjs'), url, tool, JSON.stringify(args)],
    { encoding: 'utf8', env: { ...process.env, MCP_TERMINATE: '1' }, timeout: 60000 });
  process.stdout.write(r.stdout);
  process.stderr.write(r.stderr);
  if (r.status !== 0) fail(`sdk-client exited with ${r.status} (${tool})`);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  if (!lines[0].connected || !lines[0].sessionId) fail('not connected / no session');
  if (!lines[1].tools.includes('query_object_instance') || !lines[1].tools.includes('list_knowledge_networks')) fail('tools missing from tools/list');
  const call = lines[2];
  if (call.result.isError) fail(`tool error (${tool}): ${call.result.content[0].text}`);
  if (!call.result.structuredContent) fail(`${tool}: no structuredContent`);
  return call.result;
}

const text = sdkCall('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, response_format: 'json',
  condition: { field: 'name', operation: '==', value_from: 'const', value: '阿司匹林肠溶片' } }).content[0].text;
for (const needle of ['"drug_id":9007199254740993', '"batch_no":12345678901234567890123', '"tags":[]', '"ext":{}']) {
  if (!text.includes(needle)) fail(`text block lacks ${needle}`);
}
if (compact) {
  const SUBGRAPH = [{
    object_types: [{ id: 'ot_drug', limit: 3 }, { id: 'ot_manufacturer' }],
    relation_types: [{ relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' }],
  }];
  for (const [tool, args] of [
    ['list_knowledge_networks', {}],
    ['get_kn_detail', { kn_id: 'kn_medical' }],
    ['search_schema', { kn_id: 'kn_medical', query: 'drug manufacturer' }],
    ['get_object_types', { kn_id: 'kn_medical', ids: ['ot_drug'] }],
    ['query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: SUBGRAPH }],
    ['get_logic_properties_values', { kn_id: 'kn_medical', ot_id: 'ot_company', query: 'approved drug count', _instance_identities: [{ company_id: 'company_000001' }], properties: ['approved_drug_count'] }],
    ['get_action_info', { kn_id: 'kn_medical', at_id: 'at_generate_treatment_plan' }],
    ['search_capabilities', { kn_id: 'kn_medical', limit: 10 }],
  ]) sdkCall(tool, args);
}
console.log(`sdk-check${compact ? ' (/mcp-compact)' : ''}: ok`);
