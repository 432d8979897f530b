// Every refusal an agent can meet, through the official TypeScript SDK clients (v1
// @modelcontextprotocol/sdk and v2 @modelcontextprotocol/client, the libraries of
// build/ext/sdk-client.mjs and sdk2-client.mjs): each lifecycle refusal and one error
// of every business tool comes back as an isError result - none throws (v1 checks the
// structuredContent of any result against the tool's outputSchema) - and the error
// code and required_action are read from the JSON of its one text block.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';

const EXT = path.join(ROOT, 'build/ext');
const V1 = path.join(EXT, 'node_modules/@modelcontextprotocol/sdk/dist/esm/client');
const V2 = path.join(EXT, 'node_modules/@modelcontextprotocol/client/dist/index.mjs');
const HAVE = fs.existsSync(path.join(V1, 'index.js')) && fs.existsSync(V2);
const SKIP = HAVE ? false : `the MCP SDK clients are not installed in ${EXT} (run the test command's setup)`;
const TOKEN = 'demo-user-token';
const INV = 'openbkn.ai/client-invocation-id';

let stack;
let bare; // a server without Trace Core
let raw; // a plain session for the fixtures
const clients = [];
let sdk;

before(async () => {
  if (!HAVE) return;
  const v1 = await import(pathToFileURL(path.join(V1, 'index.js')).href);
  const v1t = await import(pathToFileURL(path.join(V1, 'streamableHttp.js')).href);
  const v2 = await import(pathToFileURL(V2).href);
  sdk = { v1: [v1.Client, v1t.StreamableHTTPClientTransport], v2: [v2.Client, v2.StreamableHTTPClientTransport] };
  stack = await startStack({ capture: 'enabled' });
  bare = await startStack({ capture: 'enabled', env: { BKN_TRACE_CORE_URL: '' } });
  raw = await session(stack.server.mcpUrl);
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (stack) assert.equal(await stack.stop(), 0);
  if (bare) assert.equal(await bare.stop(), 0);
});

// The SDK clients: v1, v2 in the legacy era, v2 negotiating the era itself.
const KINDS = ['v1', 'v2-legacy', 'v2-auto'];

async function connect(kind, url, token = TOKEN) {
  const [Client, Transport] = sdk[kind.slice(0, 2)];
  const transport = new Transport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = kind === 'v1' ? new Client({ name: 'sdk-errors', version: '1' })
    : new Client({ name: 'sdk-errors', version: '1' }, { versionNegotiation: { mode: kind === 'v2-auto' ? 'auto' : 'legacy' } });
  await client.connect(transport);
  await client.listTools(); // from here on the client checks results against each outputSchema
  clients.push(client);
  return client;
}

const clientCache = new Map();
async function clientOf(kind, url = stack.server.mcpUrl, token = TOKEN) {
  const key = `${kind} ${url} ${token}`;
  if (!clientCache.has(key)) clientCache.set(key, await connect(kind, url, token));
  return clientCache.get(key);
}

// The error of an isError result: its text block's JSON; never structuredContent.
function errorOf(result, what) {
  const text = JSON.stringify(result);
  assert.equal(result.isError, true, `${what}: ${text}`);
  assert.equal(result.structuredContent, undefined, `${what}: an error carries no structuredContent: ${text}`);
  assert.equal(result.content.length, 1, text);
  const j = JSON.parse(result.content[0].text);
  const e = j;
  assert.equal(typeof e.code, 'string', `${what}: ${text}`);
  assert.equal(typeof e.required_action, 'string', `${what}: ${text}`);
  return e;
}

async function sdkError(kind, name, args, { meta, url, token } = {}) {
  const client = await clientOf(kind, url, token);
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  let result;
  try {
    result = await client.callTool(params);
  } catch (err) {
    assert.fail(`${kind} ${name}: the client threw ${err?.code ?? ''} ${err?.message ?? err}`);
  }
  return errorOf(result, `${kind} ${name}`);
}

let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;

// A new turn (through the plain session).
async function turn(agent = 'sdk-errors-agent') {
  const r = await raw.call('bkn_start_interaction', { question: 'q', agent_name: agent, conversation_mode: 'new' });
  assert.equal(r.result.isError, false, JSON.stringify(r));
  const s = r.result.structuredContent;
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}
async function finished(outcome = 'completed', agent) {
  const t = await turn(agent);
  const r = await raw.call('bkn_finish_interaction', { interaction_id: t.interaction_id, outcome, ...(outcome === 'completed' ? { answer: 'a' } : {}) });
  assert.equal(r.result.isError, false, JSON.stringify(r));
  return t;
}

const NONE = `${'0'.repeat(32)}`;
const QUERY = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 };

// [title, code, required_action, async () => [tool, args, options]]
const LIFECYCLE = [
  ['start: missing fields', 'invalid_params', 'fix_arguments', async () => ['bkn_start_interaction', { question: 'q' }]],
  ['start: continue without conversation_id', 'invalid_params', 'fix_arguments', async () => ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'continue' }]],
  ['start: unknown conversation', 'resource_not_disclosed', 'check_ids', async () => ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'continue', conversation_id: `conv_${NONE}` }]],
  ['start: the conversation has an active interaction', 'interaction_in_progress', null, async () => {
    const t = await turn();
    return ['bkn_start_interaction', { question: 'q', agent_name: 'sdk-errors-agent', conversation_mode: 'continue', conversation_id: t.conversation_id }];
  }],
  ['start: another agent_name', 'agent_name_conflict', null, async () => {
    const t = await finished('completed', 'first-agent');
    return ['bkn_start_interaction', { question: 'q', agent_name: 'second-agent', conversation_mode: 'continue', conversation_id: t.conversation_id }];
  }],
  ['start: a reused invocation id with other arguments', 'idempotency_conflict', 'use_new_idempotency_key', async () => {
    const id = uniq('start');
    const first = await raw.call('bkn_start_interaction', { question: 'one', agent_name: 'a', conversation_mode: 'new' }, { [INV]: id });
    assert.equal(first.result.isError, false, JSON.stringify(first));
    return ['bkn_start_interaction', { question: 'two', agent_name: 'a', conversation_mode: 'new' }, { meta: { [INV]: id } }];
  }],
  ['start: a malformed host hint', 'lifecycle_hint_invalid', 'fix_host_lifecycle_hint', async () => ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new' }, { meta: { [INV]: 'has space' } }]],
  ['start: Trace Core not installed', 'feature_not_installed', null, async () => ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new' }, { url: bare.server.mcpUrl, bare: true }]],
  ['finish: bkn_context given', 'invalid_params', 'fix_arguments', async () => ['bkn_finish_interaction', { interaction_id: `int_${NONE}`, outcome: 'failed', bkn_context: {} }]],
  ['finish: unknown outcome', 'invalid_params', 'fix_arguments', async () => ['bkn_finish_interaction', { interaction_id: `int_${NONE}`, outcome: 'abandoned' }]],
  ['finish: completed without an answer', 'closure_manifest_invalid', 'fix_arguments', async () => ['bkn_finish_interaction', { interaction_id: `int_${NONE}`, outcome: 'completed' }]],
  ['finish: unknown interaction', 'resource_not_disclosed', 'check_ids', async () => ['bkn_finish_interaction', { interaction_id: `int_${NONE}`, outcome: 'failed' }]],
  ['finish: completed after failed (the gateway\'s check)', 'terminal_conflict', 'reuse_authoritative_interaction', async () => {
    const t = await finished('failed');
    return ['bkn_finish_interaction', { interaction_id: t.interaction_id, outcome: 'completed', answer: 'a' }];
  }],
  ['finish: failed after completed (Trace Core\'s check)', 'terminal_conflict', 'reuse_authoritative_interaction', async () => {
    const t = await finished('completed');
    return ['bkn_finish_interaction', { interaction_id: t.interaction_id, outcome: 'failed' }];
  }],
  // bkn_context refusals of a business tool
  ['bkn_context missing', 'conversation_required', 'bkn_start_interaction', async () => ['query_object_instance', QUERY]],
  ['bkn_context without interaction_id', 'interaction_required', 'bkn_start_interaction', async () => ['query_object_instance', { ...QUERY, bkn_context: { conversation_id: (await turn()).conversation_id } }]],
  ['bkn_context with a misspelt field', 'invalid_business_context', 'correct_bkn_context', async () => {
    const t = await turn();
    return ['query_object_instance', { ...QUERY, bkn_context: { conversation_id: t.conversation_id, interaction_idd: t.interaction_id } }];
  }],
  ['bkn_context with a bad business ref', 'invalid_business_ref', 'correct_business_refs', async () => ['query_object_instance', { ...QUERY, bkn_context: { ...(await turn()), business_refs: [{ ref_type: 'planet', ref_id: 'planet:kn_medical:earth' }] } }]],
  ['bkn_context of a finished interaction', 'interaction_terminal', 'bkn_start_interaction', async () => ['query_object_instance', { ...QUERY, bkn_context: await finished() }]],
  ['bkn_context with unknown ids', 'resource_not_disclosed', 'check_ids', async () => ['query_object_instance', { ...QUERY, bkn_context: { conversation_id: `conv_${NONE}`, interaction_id: `int_${NONE}` } }]],
  ['a reused invocation id with other arguments', 'idempotency_conflict', 'use_new_idempotency_key', async () => {
    const t = await turn();
    const id = uniq('read');
    const first = await raw.call('query_object_instance', { ...QUERY, bkn_context: t }, { [INV]: id });
    assert.equal(first.result.isError, false, JSON.stringify(first));
    return ['query_object_instance', { ...QUERY, limit: 2, bkn_context: t }, { meta: { [INV]: id } }];
  }],
];

for (const [title, code, action, make] of LIFECYCLE) {
  test(`lifecycle refusal through the SDK clients: ${title} -> ${code}`, { skip: SKIP }, async () => {
    for (const kind of KINDS) {
      const [tool, args, opts = {}] = await make();
      const e = await sdkError(kind, tool, args, opts);
      assert.equal(e.code, code, `${kind}: ${JSON.stringify(e)}`);
      if (action) assert.equal(e.required_action, action, `${kind}: ${JSON.stringify(e)}`);
    }
  });
}

// One error of every business tool /mcp lists, with a valid bkn_context: [tool, args, code].
const BUSINESS = [
  ['list_knowledge_networks', { response_format: 'xml' }, 'Public.BadRequest'],
  ['get_kn_detail', { kn_id: 'kn_nope' }, 'BknBackend.KnowledgeNetwork.NotFound'],
  ['search_schema', { kn_id: 'kn_nope', query: 'x' }, 'BknBackend.KnowledgeNetwork.NotFound'],
  ['get_object_types', { kn_id: 'kn_nope', ids: ['ot_x'] }, 'BknBackend.KnowledgeNetwork.NotFound'],
  ['get_relation_types', { kn_id: 'kn_medical', ids: [] }, 'Public.BadRequest'],
  ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_nope' }, 'OntologyQuery.ObjectType.NotFound'],
  ['query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: [{ object_types: [{ id: 'ot_drug' }], relation_types: [] }] }, 'Public.BadRequest'],
  ['get_logic_properties_values', { kn_id: 'kn_medical' }, 'Public.BadRequest'],
  ['get_action_info', { kn_id: 'kn_medical', at_id: 'at_nope' }, 'OntologyQuery.ActionType.NotFound'],
  ['execute_action', { kn_id: 'kn_medical', at_id: 'at_nope' }, 'OntologyQuery.ActionType.NotFound'],
  ['get_action_execution', { kn_id: 'kn_medical', execution_id: 'exec_nope' }, 'OntologyQuery.ActionExecution.NotFound'],
  ['list_action_executions', { kn_id: 'kn_medical', bogus: 1 }, 'Public.BadRequest'],
  ['list_skills', { bogus: 1 }, 'Public.BadRequest'],
  ['get_skill_content', { skill_id: 'skill_nope' }, 'OperatorIntegration.Skill.NotFound'],
  ['read_skill_file', { skill_id: 'skill_nope', rel_path: 'a.md' }, 'OperatorIntegration.Skill.NotFound'],
  ['search_capabilities', { kn_id: 'kn_nope' }, 'BknBackend.KnowledgeNetwork.NotFound'],
  ['execute_tool', { name: 'no_such_tool', arguments: {} }, 'Public.NotFound'],
];

test('one error of every business tool through the SDK clients: an isError result, code and required_action in the text', { skip: SKIP }, async () => {
  const listed = (await raw.listAll()).map((t) => t.name).filter((t) => !t.startsWith('bkn_'));
  assert.deepEqual(BUSINESS.map(([t]) => t).sort(), [...listed].sort(), 'every business tool /mcp lists has a case');
  for (const kind of KINDS) {
    const ctx = await turn();
    for (const [tool, args, code] of BUSINESS) {
      const e = await sdkError(kind, tool, { ...args, bkn_context: ctx });
      assert.equal(e.code, code, `${kind} ${tool}: ${JSON.stringify(e)}`);
      if (!code.startsWith('Public.')) assert.ok(e.bkn_receipt, `${kind} ${tool}: a failed managed call carries its receipt`);
    }
  }
});

// The scripts themselves (what a person runs): exit 0 and print the isError result.
test('sdk-client.mjs and sdk2-client.mjs print a lifecycle refusal instead of failing', { skip: SKIP }, () => {
  for (const [script, env] of [['sdk-client.mjs', {}], ['sdk2-client.mjs', { MCP_ERA: 'legacy' }]]) {
    const r = spawnSync(process.execPath, [path.join(EXT, script), stack.server.mcpUrl, 'bkn_start_interaction', '{"bogus":1}'],
      { encoding: 'utf8', env: { ...process.env, MCP_TOKEN: TOKEN, ...env }, timeout: 60000 });
    assert.equal(r.status, 0, `${script}: ${r.stderr}`);
    const last = JSON.parse(r.stdout.trim().split('\n').pop());
    const e = errorOf(last.result ?? last, script);
    assert.equal(e.code, 'invalid_params');
    assert.equal(e.required_action, 'fix_arguments');
  }
});

// Last: the outage verdict stays cached in the gateway for a while.
test('lifecycle refusal through the SDK clients: Trace Core unreachable -> trace_core_unavailable', { skip: SKIP }, async () => {
  const fault = (body) => fetch(`${stack.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (const kind of KINDS) await clientOf(kind); // connected before the fault
  assert.equal((await fault({ service: 'trace_core', mode: 'close' })).status, 200);
  try {
    for (const kind of KINDS) {
      const e = await sdkError(kind, 'bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new' });
      assert.equal(e.code, 'trace_core_unavailable', JSON.stringify(e));
      assert.equal(e.required_action, 'retry_later');
      assert.equal(e.retryable, true);
    }
  } finally {
    await fetch(`${stack.sim.base}/_sim/reset`, { method: 'POST' });
  }
});
