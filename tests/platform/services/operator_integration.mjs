// Execution factory (agent-operator-integration): skills, toolboxes, MCP servers,
// capability search and function execution (see ../README.md). Data:
// data/factory/*.json.
//
// Faces:
//  * /internal-v1/...  trusts x-account-id / x-account-type (401 without an account);
//  * /v1/...           the public face, authenticated by the caller's own Bearer token;
//  * /oss/skill-assets/...  the "object store" behind the presigned URLs of skill
//    content and files: no headers needed, an HMAC signature and an expiry instead.
// Grants use the simulator-only `access` key of a record (lib/grants.mjs).

import { readFileSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createHmac, createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { parse } from '../lib/json.mjs';
import { json, platformError, parseBody, isPlainObject, intParam } from '../lib/http.mjs';
import { can, strip, bearerAccount } from '../lib/grants.mjs';

const PREFIX = '/api/agent-operator-integration';
const ASSETS = `${PREFIX}/oss/skill-assets/`;
const DATA = join(dirname(fileURLToPath(import.meta.url)), '..', 'data', 'factory');
const PRESIGN_TTL_S = 300;
const SECRET = randomBytes(32); // presigned URLs are valid for this process only

function load(file) {
  return parse(readFileSync(join(DATA, file), 'utf8'));
}

// Files may be generated (a long SKILL.md for truncation tests) or binary.
function materialize(f) {
  let bytes;
  if (f.content_base64 !== undefined) bytes = Buffer.from(f.content_base64, 'base64');
  else {
    let text = f.content || '';
    if (f.generate) text += f.generate.line.repeat(f.generate.repeat);
    bytes = Buffer.from(text, 'utf8');
  }
  return { rel_path: f.rel_path, file_type: f.file_type, mime_type: f.mime_type, bytes };
}

const skillsDoc = load('skills.json');
const boxesDoc = load('toolboxes.json');
const mcpDoc = load('mcp_servers.json');
const SKILLS = new Map(skillsDoc.skills.map((s) => [s.skill_id, { ...s, files: s.files.map(materialize) }]));
const BOXES = new Map(boxesDoc.toolboxes.map((b) => [b.box_id, b]));
const MCPS = new Map(mcpDoc.mcp_servers.map((m) => [m.mcp_id, m]));
const PROXY_PREFIX = boxesDoc.managed_proxy_account_prefix;
const FUNCTION_ACCESS = boxesDoc.function_runtime_access;

const SKILL_PUBLIC = ['skill_id', 'name', 'description', 'version', 'status', 'source', 'category', 'category_name',
  'business_domain_id', 'create_user', 'create_time', 'update_time'];
const pick = (obj, keys) => Object.fromEntries(keys.filter((k) => obj[k] !== undefined).map((k) => [k, obj[k]]));

// ---------------------------------------------------------------- helpers

const err = (ctx, status, code, details) => platformError(status, code, details, ctx.lang);

function account(ctx) {
  return { id: String(ctx.headers['x-account-id'] || ''), type: String(ctx.headers['x-account-type'] || '') };
}

function bodyObject(ctx) {
  const p = parseBody(ctx.bodyText, {});
  if (p.error) return { error: err(ctx, 400, 'Public.BadRequest', `invalid JSON body: ${p.error}`) };
  if (!isPlainObject(p.value)) return { error: err(ctx, 400, 'Public.BadRequest', 'the body must be a JSON object') };
  return { value: p.value };
}

function sign(path, expires) {
  return createHmac('sha256', SECRET).update(`${path}\n${expires}`).digest('hex');
}

function presign(ctx, skillId, relPath) {
  const path = ASSETS + encodeURIComponent(skillId) + '/' + relPath.split('/').map(encodeURIComponent).join('/');
  const expires = Math.floor(Date.now() / 1000) + PRESIGN_TTL_S;
  const host = ctx.headers.host || '127.0.0.1';
  return `http://${host}${path}?X-Expires=${expires}&X-Signature=${sign(path, expires)}`;
}

// Normalise a package-relative path; null when it escapes the package.
function safeRelPath(p) {
  if (typeof p !== 'string' || p === '' || p.startsWith('/') || /[\\\u0000-\u001f]/.test(p)) return null;
  const out = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') return null;
    out.push(seg);
  }
  return out.length ? out.join('/') : null;
}

function skillOr404(ctx, id) {
  const s = SKILLS.get(id);
  if (!s) return { error: err(ctx, 404, 'OperatorIntegration.Skill.NotFound', `skill ${id} not found`) };
  return { skill: s };
}

const mayView = (s, acct) => can(s.access, acct, 'view') || can(s.access, acct, 'public_access');

// ---------------------------------------------------------------- skills

function skillsMarket(ctx) {
  const bd = ctx.headers['x-business-domain'];
  if (!bd) return err(ctx, 400, 'OperatorIntegration.Skill.InvalidParameter', 'the x-business-domain header is required');
  const q = ctx.query;
  const page = intParam(q, 'page', 1);
  let size = intParam(q, 'page_size', 20);
  if (Number.isNaN(page) || Number.isNaN(size)) return err(ctx, 400, 'OperatorIntegration.Skill.InvalidParameter', 'page and page_size must be integers');
  const p = Math.max(page, 1);
  size = Math.min(Math.max(size, 1), 100);
  const name = (q.get('name') || '').toLowerCase();
  const category = q.get('category') || '';
  const acct = account(ctx).id;
  const all = [...SKILLS.values()].filter((s) => s.status === 'published'
    && (s.business_domain_id === bd || s.business_domain_id === 'bd_public')
    && mayView(s, acct)
    && (!name || s.name.toLowerCase().includes(name))
    && (!category || s.category === category));
  const total = all.length;
  const pages = Math.ceil(total / size);
  return json(200, {
    total, page: p, page_size: size, total_pages: pages, has_next: p < pages, has_prev: p > 1,
    data: all.slice((p - 1) * size, p * size).map((s) => pick(s, SKILL_PUBLIC)),
  });
}

function skillContent(ctx, id) {
  const { skill, error } = skillOr404(ctx, id);
  if (error) return error;
  if (!mayView(skill, account(ctx).id)) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: view was not granted for skill:${id}`);
  }
  return json(200, {
    skill_id: id,
    url: presign(ctx, id, 'SKILL.md'),
    status: skill.status,
    files: skill.files.map((f) => ({ rel_path: f.rel_path, file_type: f.file_type, size: f.bytes.length, mime_type: f.mime_type })),
  });
}

function skillFileRead(ctx, id) {
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { skill, error } = skillOr404(ctx, id);
  if (error) return error;
  if (!mayView(skill, account(ctx).id)) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: view was not granted for skill:${id}`);
  }
  if (typeof b.value.rel_path !== 'string' || b.value.rel_path === '') {
    return err(ctx, 400, 'OperatorIntegration.Skill.InvalidParameter', 'rel_path is required');
  }
  const rel = safeRelPath(b.value.rel_path);
  if (!rel) return err(ctx, 400, 'OperatorIntegration.Skill.InvalidRelPath', `rel_path escapes the skill package: ${b.value.rel_path}`);
  const f = skill.files.find((x) => x.rel_path === rel);
  if (!f) return err(ctx, 404, 'OperatorIntegration.Skill.FileNotFound', `file ${rel} not found in skill ${id}`);
  return json(200, { skill_id: id, rel_path: rel, url: presign(ctx, id, rel), mime_type: f.mime_type, file_type: f.file_type });
}

function skillExecute(ctx, id) {
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { skill, error } = skillOr404(ctx, id);
  if (error) return error;
  const acct = account(ctx).id;
  if (!can(skill.access, acct, 'execute') && !can(skill.access, acct, 'public_access')) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: execute was not granted for skill:${id}`);
  }
  const { entry_shell: entry, timeout } = b.value;
  if (typeof entry !== 'string' || entry.trim() === '') return err(ctx, 400, 'OperatorIntegration.Skill.InvalidParameter', 'entry_shell is required');
  if (timeout !== undefined && !(Number.isInteger(Number(timeout)) && timeout >= 1 && timeout <= 600)) {
    return err(ctx, 400, 'OperatorIntegration.Skill.InvalidParameter', 'timeout must be an integer from 1 to 600');
  }
  if (skill.status !== 'published') return err(ctx, 400, 'OperatorIntegration.Skill.NotPublished', `skill ${id} is not published`);
  const e = skill.entries.find((x) => x.command === entry.trim());
  if (!e) return err(ctx, 400, 'OperatorIntegration.Skill.InvalidEntry', `entry_shell is not an entry declared in SKILL.md of ${id}: ${entry}`);
  const session = createHash('sha256').update(`${id}|${acct}`).digest('hex').slice(0, 16);
  const workDir = `/workspace/skills/sess_${session}`;
  return json(200, {
    skill_id: id, session_id: `sess_${session}`, work_dir: workDir, file_name: `${id}.zip`,
    uploaded_path: `${workDir}/${id}.zip`, command: e.command, exit_code: e.exit_code,
    stdout: e.stdout, stderr: e.stderr, execution_time: 40 + e.stdout.length, mocked: false,
  });
}

function asset(ctx) {
  if (ctx.method !== 'GET') return err(ctx, 405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`);
  const expires = Number(ctx.query.get('X-Expires'));
  const sig = ctx.query.get('X-Signature') || '';
  const want = sign(ctx.path, expires);
  const ok = sig.length === want.length && timingSafeEqual(Buffer.from(sig), Buffer.from(want));
  if (!ok) return err(ctx, 403, 'Sim.PresignedURL.SignatureMismatch', 'the presigned URL signature does not match');
  if (!(expires * 1000 > Date.now())) return err(ctx, 403, 'Sim.PresignedURL.Expired', 'the presigned URL has expired');
  const segs = ctx.path.slice(ASSETS.length).split('/').map(decodeURIComponent);
  const skill = SKILLS.get(segs[0]);
  const f = skill && skill.files.find((x) => x.rel_path === segs.slice(1).join('/'));
  if (!f) return err(ctx, 404, 'Sim.PresignedURL.NoSuchKey', 'no such object');
  const type = f.mime_type.startsWith('text/') ? `${f.mime_type}; charset=utf-8` : f.mime_type;
  return { status: 200, headers: { 'content-type': type }, body: f.bytes };
}

// ---------------------------------------------------------------- toolboxes

function findTool(ctx, boxId, toolId) {
  const box = BOXES.get(boxId);
  if (!box) return { error: err(ctx, 404, 'OperatorIntegration.ToolBox.NotFound', `tool box ${boxId} not found`) };
  if (toolId === undefined) return { box };
  const tool = box.tools.find((t) => t.tool_id === toolId);
  if (!tool) return { error: err(ctx, 404, 'OperatorIntegration.Tool.NotFound', `tool ${toolId} not found in tool box ${boxId}`) };
  return { box, tool };
}

// The api_spec parts a schema reader needs: no server address, no source.
function schemaSpec(spec) {
  return pick(spec, ['parameters', 'request_body', 'responses', 'components']);
}

function toolDetail(ctx, boxId, toolId) {
  const { box, tool, error } = findTool(ctx, boxId, toolId);
  if (error) return error;
  const acct = account(ctx).id;
  if (acct.startsWith(PROXY_PREFIX)) {
    // The network's managed proxy account: the published definition, schemas only.
    if (box.status !== 'published' || tool.status !== 'enabled') {
      return err(ctx, 403, 'Public.Forbidden',
        `Public.Forbidden: the managed proxy account may read only a published tool; ${boxId}/${toolId} has no published version`);
    }
    const m = tool.metadata;
    return json(200, {
      tool_id: tool.tool_id, name: tool.name, description: tool.description, status: tool.status,
      metadata_type: tool.metadata_type,
      metadata: { version: m.version, summary: m.summary, description: m.description, api_spec: schemaSpec(m.api_spec) },
    });
  }
  if (!can(box.access, acct, 'view')) {
    return err(ctx, 403, 'Public.Forbidden',
      `Public.Forbidden: view was not granted for tool_box:${boxId} (tool ${toolId}) to account ${acct}`);
  }
  return json(200, { box_id: box.box_id, box_name: box.name, ...tool, global_parameters: {} });
}

function boxLifecycle(ctx, boxId) {
  const { box, error } = findTool(ctx, boxId);
  if (error) return error;
  return json(200, {
    box_id: box.box_id, name: box.name, status: box.status,
    tools: box.tools.map((t) => ({ tool_id: t.tool_id, name: t.name, status: t.status })),
  });
}

function toolsList(ctx, boxId, acct) {
  const { box, error } = findTool(ctx, boxId);
  if (error) return error;
  if (!can(box.access, acct, 'view')) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: view was not granted for tool_box:${boxId}`);
  }
  const q = ctx.query;
  const page = intParam(q, 'page', 1);
  const size = intParam(q, 'page_size', 20);
  const status = q.get('status') || '';
  if (Number.isNaN(page) || page < 1 || Number.isNaN(size) || size < 1 || size > 100) {
    return err(ctx, 400, 'OperatorIntegration.Tool.InvalidParameter', 'page must be >= 1 and page_size 1..100');
  }
  if (status && status !== 'enabled' && status !== 'disabled') {
    return err(ctx, 400, 'OperatorIntegration.Tool.InvalidParameter', 'status must be enabled or disabled');
  }
  // An unpublished box offers nothing to call.
  const tools = box.status !== 'published' ? [] : box.tools.filter((t) => !status || t.status === status);
  return json(200, {
    box_id: box.box_id, box_name: box.name, total: tools.length, page, page_size: size,
    has_next: page * size < tools.length,
    tools: tools.slice((page - 1) * size, page * size).map((t) => ({
      tool_id: t.tool_id, name: t.name, description: t.description, status: t.status, use_rule: t.use_rule,
      metadata_type: t.metadata_type, metadata: { api_spec: t.metadata.api_spec },
    })),
  });
}

const RATES = { CNY: 1, USD: 7.18, EUR: 7.82, JPY: 0.046 };
const round = (x, d) => Math.round(x * 10 ** d) / 10 ** d;

// The fake functions behind the toolbox proxy. A function's own failure is a 200.
function runTool(tool, req) {
  const body = isPlainObject(req.body) ? req.body : {};
  const path = isPlainObject(req.path) ? req.path : {};
  switch (tool.name) {
    case 'fx_convert': {
      const amount = Number(body.amount);
      if (body.amount === undefined || !Number.isFinite(amount) || typeof body.from !== 'string' || typeof body.to !== 'string') {
        return { error: 'amount, from and to are required' };
      }
      for (const c of [body.from, body.to]) if (!(c in RATES)) return { error: `unsupported currency ${c}` };
      const rate = round(RATES[body.from] / RATES[body.to], 6);
      return { amount: body.amount, from: body.from, to: body.to, rate, converted: round(amount * rate, 2) };
    }
    case 'generate_treatment_plan': {
      const id = path.disease_id || body.disease_id || 'unknown';
      return { plan_id: `plan_${id}`, summary: `${body.disease_name || id}治疗方案（${body.severity || 'moderate'}）已生成` };
    }
    case 'expedite_order':
      if (typeof body.po_id !== 'string') return { error: 'po_id is required' };
      return { expedited: true, po_id: body.po_id, ticket: `EXP-${body.po_id}` };
    case 'company_risk_assessment': {
      const name = String(body.company_name || '');
      const score = [...name].reduce((a, c) => a + c.codePointAt(0), 0) % 100;
      return { risk_level: score < 34 ? 'low' : score < 67 ? 'medium' : 'high', score };
    }
    case 'drug_interaction_check':
      return { interaction: 'none', advice: `${body.drug_a || '?'} 与 ${body.drug_b || '?'} 未见已知相互作用` };
    case 'scale_deployment':
      return { scaled: true, pod_name: String(body.pod_name || ''), replicas: body.replicas };
    default:
      return { ok: true, echo: body };
  }
}

const PROXY_KEYS = ['header', 'query', 'path', 'body', 'timeout'];

function toolProxy(ctx, boxId, toolId, acct) {
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { box, tool, error } = findTool(ctx, boxId, toolId);
  if (error) return error;
  if (acct !== null && !can(box.access, acct, 'execute')) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: execute was not granted for tool_box:${boxId}`);
  }
  for (const k of Object.keys(b.value)) {
    if (!PROXY_KEYS.includes(k)) {
      return err(ctx, 400, 'OperatorIntegration.Proxy.InvalidParameter',
        `unexpected key "${k}": the proxy body is {"body": {...arguments}} with optional header, query, path, timeout`);
    }
  }
  if (b.value.body !== undefined && !isPlainObject(b.value.body)) {
    return err(ctx, 400, 'OperatorIntegration.Proxy.InvalidParameter', 'body must be a JSON object');
  }
  if (box.status !== 'published' || tool.status !== 'enabled') {
    return err(ctx, 400, 'OperatorIntegration.Tool.NotExecutable', `tool ${toolId} is disabled or tool box ${boxId} is unpublished`);
  }
  return json(200, runTool(tool, b.value));
}

// ---------------------------------------------------------------- MCP

function findMcp(ctx, mcpId) {
  const m = MCPS.get(mcpId);
  return m ? { m } : { error: err(ctx, 404, 'OperatorIntegration.MCP.NotFound', `MCP server ${mcpId} not found`) };
}

function mcpCall(ctx, mcpId) {
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { m, error } = findMcp(ctx, mcpId);
  if (error) return error;
  const { tool_name: name, parameters = {} } = b.value;
  if (typeof name !== 'string' || name === '') return err(ctx, 400, 'OperatorIntegration.MCP.InvalidParameter', 'tool_name is required');
  if (!isPlainObject(parameters)) return err(ctx, 400, 'OperatorIntegration.MCP.InvalidParameter', 'parameters must be a JSON object');
  if (m.status !== 'published') return err(ctx, 400, 'OperatorIntegration.MCP.NotPublished', `MCP server ${mcpId} is not published`);
  const tool = m.tools.find((t) => t.name === name);
  if (!tool) return err(ctx, 404, 'OperatorIntegration.MCP.ToolNotFound', `tool ${name} not found on MCP server ${mcpId}`);
  const text = (t, isError = false, extra = {}) => json(200, { content: [{ type: 'text', text: t }], ...extra, isError });
  if (name === 'get_pod_logs') {
    if (typeof parameters.pod_name !== 'string') return text('pod_name is required', true);
    const n = Math.min(Math.max(Number(parameters.tail_lines) || 3, 1), 100);
    const lines = [];
    for (let i = 1; i <= n; i++) lines.push(`2025-01-01T00:00:0${i % 10}Z ${parameters.pod_name} INFO line ${i}`);
    return text(lines.join('\n'));
  }
  if (name === 'restart_pod') {
    if (typeof parameters.pod_name !== 'string' || !Number.isInteger(parameters.grace_period_seconds)) {
      return text('pod_name and grace_period_seconds are required', true);
    }
    const ns = parameters.namespace || 'default';
    return text(`pod ${ns}/${parameters.pod_name} restarted (grace period ${parameters.grace_period_seconds}s)`, false,
      { structuredContent: { restarted: true, pod_name: parameters.pod_name, namespace: ns } });
  }
  return text('pong');
}

// ---------------------------------------------------------------- capabilities

// Query terms: ASCII words, and CJK runs as character bigrams.
function terms(q) {
  const out = [];
  for (const chunk of q.toLowerCase().split(/[\s,.;:!?，。；：！？、()（）]+/).filter(Boolean)) {
    for (const part of chunk.match(/[a-z0-9_]+|[^a-z0-9_]+/g) || []) {
      if (/^[a-z0-9_]+$/.test(part) || part.length === 1) out.push(part);
      else for (let i = 0; i + 1 < part.length; i++) out.push(part.slice(i, i + 2));
    }
  }
  return out;
}

function resolveRef(ref) {
  const { capability_type: type, owner_id: owner = '', capability_id: id } = ref;
  if (type === 'function') {
    const box = BOXES.get(owner);
    const t = box && box.tools.find((x) => x.tool_id === id);
    return t && { capability_type: type, owner_id: owner, capability_id: id, metadata_type: t.metadata_type, name: t.name, description: t.description };
  }
  if (type === 'mcp_tool') {
    const m = MCPS.get(owner);
    const t = m && m.tools.find((x) => x.name === id);
    return t && { capability_type: type, owner_id: owner, capability_id: id, name: t.name, description: t.description };
  }
  if (type === 'skill') {
    const s = SKILLS.get(id);
    return s && s.status === 'published' && { capability_type: type, owner_id: owner, capability_id: id, name: s.name, description: s.description };
  }
  return null;
}

const CAP_TYPES = ['skill', 'function', 'mcp_tool'];
const META_TYPES = ['openapi', 'function'];

function capabilitiesSearch(ctx) {
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { query = '', refs = [], top_k: topK = 10, types, metadata_types: metaTypes } = b.value;
  const bad = (m) => err(ctx, 400, 'OperatorIntegration.Capability.InvalidParameter', m);
  if (typeof query !== 'string') return bad('query must be a string');
  if (!Array.isArray(refs) || !refs.every((r) => isPlainObject(r) && CAP_TYPES.includes(r.capability_type) && typeof r.capability_id === 'string')) {
    return bad(`refs must be [{capability_type (${CAP_TYPES.join('|')}), owner_id, capability_id}]`);
  }
  if (!Number.isInteger(topK) || topK < 1 || topK > 1000) return bad('top_k must be an integer from 1 to 1000');
  if (types !== undefined && !(Array.isArray(types) && types.every((t) => CAP_TYPES.includes(t)))) return bad(`types must be a subset of ${CAP_TYPES.join(', ')}`);
  if (metaTypes !== undefined && !(Array.isArray(metaTypes) && metaTypes.every((t) => META_TYPES.includes(t)))) {
    return bad(`metadata_types must be a subset of ${META_TYPES.join(', ')}`);
  }
  const qt = terms(query);
  const hits = [];
  refs.forEach((r, idx) => {
    const e = resolveRef(r);
    if (!e) return;
    if (types && types.length && !types.includes(e.capability_type)) return;
    if (metaTypes && metaTypes.length && !metaTypes.includes(e.metadata_type)) return;
    let score = 1;
    let by = 'listing';
    if (qt.length) {
      const text = `${e.name} ${e.description} ${e.capability_id}`.toLowerCase();
      score = round(qt.filter((t) => text.includes(t)).length / qt.length, 4);
      by = 'keyword';
      if (score === 0) return;
    }
    hits.push({ idx, e: { ...e, matched_by: by, score } });
  });
  hits.sort((a, b) => b.e.score - a.e.score || a.idx - b.idx);
  return json(200, { entries: hits.slice(0, topK).map((h) => h.e) });
}

// ---------------------------------------------------------------- function execution (PTC)

// The sandbox, for real but only as test equipment: python3 -I or
// sh -c in a throwaway work directory per work_dir (one per conversation, picked by
// Context Loader) under a temp root made on first use and removed when the process
// exits; a time limit that kills the whole process group; capped output. The
// sandbox's environment gets the stub's callback URL (event.mcp) and the caller's
// own token, so the stub can call back as the caller. Loopback callers only.
const OUTPUT_CAP = 1 << 20; // bytes of stdout and of stderr
const DEFAULT_TIMEOUT_S = 60;
let sandboxRoot = null;
let pythonBin = null;

function sandboxDir(workDir) {
  if (!sandboxRoot) {
    sandboxRoot = mkdtempSync(join(tmpdir(), 'cl-sim-sandbox-'));
    process.on('exit', () => { try { rmSync(sandboxRoot, { recursive: true, force: true }); } catch { /* gone */ } });
  }
  const dir = join(sandboxRoot, workDir);
  mkdirSync(dir, { recursive: true });
  return dir;
}

// The interpreter behind `python3` (a pyenv shim needs an environment the sandbox does not get).
function python() {
  if (!pythonBin) {
    try {
      pythonBin = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8', timeout: 10000 }).trim();
    } catch {
      pythonBin = 'python3';
    }
  }
  return pythonBin;
}

// Calls handler(event) when the submitted code defines one (the stub's convention).
const PY_TRAILER = '\n\nif __name__ == "__main__" and callable(globals().get("handler")):\n'
  + '    import json as _sim_json, sys as _sim_sys\n'
  + '    handler(_sim_json.loads(_sim_sys.stdin.read() or "{}"))\n';

function collect(stream, out) {
  stream.on('data', (c) => {
    const room = OUTPUT_CAP - out.size;
    if (room <= 0) { out.truncated = true; return; }
    const part = c.length > room ? c.subarray(0, room) : c;
    if (part.length < c.length) out.truncated = true;
    out.chunks.push(part);
    out.size += part.length;
  });
}

function runSandbox({ code, language, event, timeout, workDir, token }) {
  return new Promise((resolve) => {
    const dir = sandboxDir(workDir);
    const env = {
      PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8',
      BKN_MCP_URL: typeof event.mcp === 'string' ? event.mcp : '', BKN_TOKEN: token,
    };
    let cmd; let args; let input = ''; let cleanup = null; let done = false;
    if (language === 'python') {
      const runDir = mkdtempSync(join(sandboxRoot, '.run-'));
      const script = join(runDir, 'main.py');
      writeFileSync(script, code + PY_TRAILER);
      cmd = python();
      args = ['-I', script];
      input = JSON.stringify(event);
      cleanup = () => rmSync(runDir, { recursive: true, force: true });
    } else {
      cmd = 'sh';
      args = ['-c', code];
    }
    const child = spawn(cmd, args, { cwd: dir, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = { chunks: [], size: 0, truncated: false };
    const err = { chunks: [], size: 0, truncated: false };
    collect(child.stdout, out);
    collect(child.stderr, err);
    child.stdin.on('error', () => {});
    child.stdin.end(input);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ }
    }, timeout * 1000);
    const finish = (exitCode) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* the group is gone */ }
      if (cleanup) cleanup();
      let stderr = Buffer.concat(err.chunks).toString('utf8');
      if (timedOut) stderr += `\n(sandbox) killed after the ${timeout} s time limit\n`;
      const r = { stdout: Buffer.concat(out.chunks).toString('utf8'), stderr, exit_code: timedOut ? 124 : exitCode };
      if (out.truncated || err.truncated) r.truncated = true;
      resolve(r);
    };
    child.on('error', () => finish(127));
    child.on('close', (status, signal) => finish(status ?? (signal ? 128 + 9 : 1)));
  });
}

const LOOPBACK_HOST = /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/i;

async function functionExecute(ctx) {
  const who = bearerAccount(ctx.headers);
  if (!who) return err(ctx, 401, 'Public.Unauthorized', 'a valid Bearer token of the caller is required');
  const b = bodyObject(ctx);
  if (b.error) return b.error;
  const { code, language, timeout } = b.value;
  const bad = (m) => err(ctx, 400, 'OperatorIntegration.Function.InvalidParameter', m);
  if (typeof code !== 'string' || code.trim() === '') return bad('code is required');
  if (language !== 'python' && language !== 'shell') return bad('language must be python or shell');
  if (timeout !== undefined && !(Number.isInteger(timeout) && timeout >= 1 && timeout <= 600)) return bad('timeout must be an integer from 1 to 600');
  if (b.value.event !== undefined && !isPlainObject(b.value.event)) return bad('event must be a JSON object');
  const workDir = b.value.work_dir === undefined ? 'shared' : b.value.work_dir;
  if (typeof workDir !== 'string' || !/^[A-Za-z0-9_-]{1,80}$/.test(workDir)) return bad('work_dir must be 1-80 characters of [A-Za-z0-9_-]');
  if (!can(FUNCTION_ACCESS, who.id, 'execute')) {
    return err(ctx, 403, 'Public.Forbidden', `Public.Forbidden: execute was not granted for the function runtime to ${who.id}`);
  }
  if (!LOOPBACK_HOST.test(String(ctx.headers.host || ''))) {
    return err(ctx, 403, 'Public.Forbidden', 'the simulated sandbox runs code for loopback callers only');
  }
  const token = /^Bearer (.+)$/.exec(String(ctx.headers.authorization))[1];
  const r = await runSandbox({ code, language, event: b.value.event || {}, timeout: timeout || DEFAULT_TIMEOUT_S, workDir, token });
  return json(200, r);
}

// ---------------------------------------------------------------- routing

function route(ctx, segs) {
  const m = ctx.method;
  const is = (...p) => segs.length === p.length && p.every((x, i) => x === '*' || x === segs[i]);
  const only = (method, fn) => (m === method ? fn() : err(ctx, 405, 'Public.MethodNotAllowed', `${m} not supported here`));

  if (segs[0] === 'v1') {
    if (is('v1', 'function', 'execute')) return only('POST', () => functionExecute(ctx));
    const isList = is('v1', 'tool-box', '*', 'tools', 'list');
    const isProxy = is('v1', 'tool-box', '*', 'proxy', '*');
    if (!isList && !isProxy) return null;
    const who = bearerAccount(ctx.headers);
    if (!who) return err(ctx, 401, 'Public.Unauthorized', 'a valid Bearer token of the caller is required');
    return isList ? only('GET', () => toolsList(ctx, segs[2], who.id)) : only('POST', () => toolProxy(ctx, segs[2], segs[4], who.id));
  }
  if (segs[0] !== 'internal-v1') return null;
  const acct = account(ctx).id;
  if (!acct) return err(ctx, 401, 'Public.Unauthorized', 'missing x-account-id header');
  if (is('internal-v1', 'skills', 'market')) return only('GET', () => skillsMarket(ctx));
  if (is('internal-v1', 'skills', '*', 'content')) return only('GET', () => skillContent(ctx, segs[2]));
  if (is('internal-v1', 'skills', '*', 'files', 'read')) return only('POST', () => skillFileRead(ctx, segs[2]));
  if (is('internal-v1', 'skills', '*', 'execute')) return only('POST', () => skillExecute(ctx, segs[2]));
  if (is('internal-v1', 'capabilities', 'search')) return only('POST', () => capabilitiesSearch(ctx));
  if (is('internal-v1', 'tool-box', '*')) return only('GET', () => boxLifecycle(ctx, segs[2]));
  if (is('internal-v1', 'tool-box', '*', 'tool', '*')) return only('GET', () => toolDetail(ctx, segs[2], segs[4]));
  // The KN-managed proxy variant runs under the network's account: no per-user grant.
  if (is('internal-v1', 'tool-box', '*', 'proxy', '*')) return only('POST', () => toolProxy(ctx, segs[2], segs[4], null));
  if (is('internal-v1', 'caller', 'tool-box', '*', 'tools', 'list')) return only('GET', () => toolsList(ctx, segs[3], acct));
  if (is('internal-v1', 'caller', 'tool-box', '*', 'proxy', '*')) return only('POST', () => toolProxy(ctx, segs[3], segs[5], acct));
  if (is('internal-v1', 'mcp', '*')) {
    return only('GET', () => {
      const { m: s, error } = findMcp(ctx, segs[2]);
      return error || json(200, { mcp_id: s.mcp_id, name: s.name, description: s.description, status: s.status });
    });
  }
  if (is('internal-v1', 'mcp', 'proxy', '*', 'tools')) {
    return only('GET', () => {
      const { m: s, error } = findMcp(ctx, segs[3]);
      return error || json(200, { tools: s.tools.map((t) => strip(t, [])) });
    });
  }
  if (is('internal-v1', 'mcp', 'proxy', '*', 'tool', 'call')) return only('POST', () => mcpCall(ctx, segs[3]));
  return null;
}

export default {
  name: 'operator_integration',
  prefix: `${PREFIX}/`,
  handle(ctx) {
    if (ctx.path.startsWith(ASSETS)) return asset(ctx);
    const segs = ctx.path.slice(PREFIX.length).split('/').filter((s) => s !== '').map(decodeURIComponent);
    return route(ctx, segs);
  },
};

/** Data for tests and for other services (read-only). */
export const factoryData = { SKILLS, BOXES, MCPS, PROXY_PREFIX };
