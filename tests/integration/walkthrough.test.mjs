// The model-facing walk-through of the catalogue through the official MCP SDK client, all
// inside one interaction with capture enabled: start -> list_knowledge_networks ->
// search_schema -> get_object_types -> query_object_instance -> get_action_info ->
// execute_action -> get_action_execution until completed -> finish. The
// _instance_identity comes from the query results, and every business result
// carries a receipt of that interaction.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT } from './lib/stack.mjs';

const SDK_DIR = path.join(ROOT, 'build/ext/node_modules/@modelcontextprotocol/sdk/dist/esm/client');
const HAVE_SDK = fs.existsSync(path.join(SDK_DIR, 'index.js')) && fs.existsSync(path.join(SDK_DIR, 'streamableHttp.js'));
const NO_SDK = HAVE_SDK ? false : `the official MCP SDK is not installed in ${SDK_DIR} (run the test command's setup)`;

let stack;
let client;

before(async () => {
  stack = await startStack({ capture: 'enabled' });
  if (!HAVE_SDK) return;
  const { Client } = await import(pathToFileURL(path.join(SDK_DIR, 'index.js')).href);
  const { StreamableHTTPClientTransport } = await import(pathToFileURL(path.join(SDK_DIR, 'streamableHttp.js')).href);
  const transport = new StreamableHTTPClientTransport(new URL(stack.server.mcpUrl),
    { requestInit: { headers: { Authorization: 'Bearer demo-user-token', 'Accept-Language': 'en-US' } } });
  client = new Client({ name: 'walkthrough-test', version: '1.0.0' });
  await client.connect(transport);
});

after(async () => {
  if (client) await client.close().catch(() => {});
  if (stack) assert.equal(await stack.stop(), 0);
});

function ok(result, what) {
  assert.equal(result.isError, false, `${what}: ${JSON.stringify(result)}`);
  return result.structuredContent;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('walk-through: discover, query, act and follow the execution inside one interaction', { skip: NO_SDK }, async () => {
  await client.listTools(); // the SDK validates structuredContent against each outputSchema from here on
  const started = ok(await client.callTool({ name: 'bkn_start_interaction', arguments: { question: 'Restart the failed pods of the ops network', agent_name: 'walkthrough-agent', conversation_mode: 'new' } }), 'start');
  const ctx = { conversation_id: started.conversation_id, interaction_id: started.interaction_id };
  const receipts = [];
  const call = async (name, args) => {
    const s = ok(await client.callTool({ name, arguments: { ...args, bkn_context: ctx } }), name);
    const r = s.bkn_receipt;
    assert.ok(r, `${name}: no bkn_receipt`);
    assert.equal(r.interaction_id, ctx.interaction_id, name);
    assert.equal(r.conversation_id, ctx.conversation_id, name);
    assert.equal(r.tool_name, name);
    assert.match(r.receipt_id, /^rcpt_/);
    receipts.push(r);
    return s;
  };

  const kns = await call('list_knowledge_networks', {});
  const ops = kns.entries.find((k) => /Operations|运维/.test(`${k.name} ${k.description}`));
  assert.ok(ops, JSON.stringify(kns.entries));
  const kn = ops.id;

  const schema = await call('search_schema', { kn_id: kn, query: 'pod restart' });
  const pod = schema.object_types.find((o) => o.concept_id === 'ot_pod');
  assert.ok(pod, JSON.stringify(schema));
  const action = schema.action_types.find((a) => a.object_type_id === pod.concept_id && /restart|重启/i.test(`${a.id} ${a.name}`));
  assert.ok(action, JSON.stringify(schema.action_types));

  const types = await call('get_object_types', { kn_id: kn, ids: [pod.concept_id] });
  const statusProp = types.object_types[0].data_properties.find((p) => p.name === 'status');
  assert.ok(statusProp);

  const q = await call('query_object_instance', { kn_id: kn, ot_id: pod.concept_id, filters: [{ field: 'status', op: '==', value: 'Failed' }], limit: 5 });
  assert.equal(q.datas.length, 1, JSON.stringify(q.datas));
  const identity = q.datas[0]._instance_identity;
  assert.deepEqual(Object.keys(identity).sort(), ['id', 'pod_ip']);

  const info = await call('get_action_info', { kn_id: kn, at_id: action.id, _instance_identities: [identity] });
  const tool = info._dynamic_tools[0];
  assert.deepEqual(tool.fixed_params._instance_identities, [identity]);
  const dynamicParams = {};
  for (const name of tool.parameters.properties.dynamic_params.required || []) dynamicParams[name] = 10;
  assert.deepEqual(Object.keys(dynamicParams), ['grace_period_seconds']);

  const seq0 = (await (await fetch(`${stack.sim.base}/_sim/requests`)).json()).last_seq;
  const exec = await call('execute_action', { kn_id: kn, at_id: action.id, _instance_identities: tool.fixed_params._instance_identities, dynamic_params: dynamicParams });
  assert.match(exec.execution_id, /\S/);
  // it did not wait for the result: no read of the execution on the way (counted, not
  // timed)
  const during = (await (await fetch(`${stack.sim.base}/_sim/requests?since=${seq0}`)).json()).requests;
  assert.ok(!during.some((r) => /action-(executions|logs)/.test(r.path)), `execute_action waited for the result: ${during.map((r) => `${r.method} ${r.path}`).join(', ')}`);

  let run;
  for (let i = 0; i < 20; i++) {
    run = await call('get_action_execution', { kn_id: kn, execution_id: exec.execution_id });
    if (run.status === 'completed' || run.status === 'failed') break;
    await sleep(150);
  }
  assert.equal(run.status, 'completed', JSON.stringify(run));
  assert.equal(run.success_count, 1);
  assert.equal(run.results[0].status, 'success');
  assert.deepEqual(run.results[0]._instance_identity, identity);
  assert.equal(run.results[0].parameters.grace_period_seconds, 10);

  const fin = ok(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: ctx.interaction_id, outcome: 'completed', answer: `Restarted ${q.datas[0]._display}.` } }), 'finish');
  assert.equal(fin.execution_status, 'completed');
  assert.equal(fin.evidence_status, 'complete');

  // Trace Core holds one operation per business call, all under this interaction.
  const st = await (await fetch(`${stack.sim.base}/_sim/trace/state`)).json();
  const inter = st.interactions.find((i) => i.interaction_id === ctx.interaction_id);
  assert.deepEqual([...inter.operation_ids].sort(), receipts.map((r) => r.operation_id).sort());
  assert.equal(new Set(receipts.map((r) => r.operation_id)).size, receipts.length);
  const names = receipts.map((r) => r.tool_name);
  assert.deepEqual(names.slice(0, 6), ['list_knowledge_networks', 'search_schema', 'get_object_types', 'query_object_instance', 'get_action_info', 'execute_action']);
  assert.ok(names.slice(6).every((n) => n === 'get_action_execution') && names.length > 6);
});
