// ontology-query, internal face: actions.
//   POST …/action-types/{at}            action recall (x-http-method-override: GET)
//   POST …/action-types/{at}/execute    asynchronous execution (a real POST)
//   GET  …/action-executions/{id}       one execution, legacy: at most 1000 results
//   GET  …/action-logs/{id}             one execution, results paged (window of 10000)
//   GET  …/action-logs                  execution history (offset or search_after)
// Executions started here live in `state.executions` (cleared by /_sim/reset) and move
// pending -> running -> completed one step per read, or by time, whichever is first.

import { createHash, randomBytes } from 'node:crypto';
import { json, platformError, parseBody, isPlainObject } from '../lib/http.mjs';
import { publicActionType } from '../lib/dataset.mjs';
import { applyAccess, evaluate, compare, instanceMeta, checkSearchHeaders } from './ontology_query.mjs';

const INVALID = 'OntologyQuery.ActionType.InvalidParameter';
const EXEC_INVALID = 'OntologyQuery.ActionExecution.InvalidParameter';
const LEGACY_MAX_RESULTS = 1000;
const RESULTS_WINDOW = 10000; // results_offset + page size never exceeds this
const STEP_MS = 400; // time per status step when nobody polls
const STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'];
const TRIGGERS = ['manual', 'scheduled'];

class BadRequest extends Error {}

// ---------- helpers ----------

function findAction(n, atId) {
  return n.actionTypes.find((a) => a.id === atId) || null;
}

/** The row of `ot` whose primary keys equal `identity`, or null. */
function findRow(rows, def, identity) {
  if (!isPlainObject(identity)) return null;
  return rows.find((r) => def.primary_keys.every((pk) => pk in identity && compare(r[pk], identity[pk]) === 0)) || null;
}

/** Parameter values for one target: const and property parameters (and inputs when given). */
function resolveParams(at, row, dynamic) {
  const out = {};
  for (const p of at.parameters || []) {
    if (p.value_from === 'const') out[p.name] = p.value;
    else if (p.value_from === 'property' && row) out[p.name] = row[p.value] ?? null;
    else if (p.value_from === 'input' && dynamic && p.name in dynamic) out[p.name] = dynamic[p.name];
  }
  return out;
}

function fillTemplate(tpl, params) {
  if (typeof tpl === 'string') {
    const whole = /^\{\{(\w+)\}\}$/.exec(tpl);
    if (whole) return params[whole[1]] ?? null; // keeps the parameter's own type
    return tpl.replace(/\{\{(\w+)\}\}/g, (_, k) => String(params[k] ?? ''));
  }
  if (Array.isArray(tpl)) return tpl.map((v) => fillTemplate(v, params));
  if (isPlainObject(tpl)) return Object.fromEntries(Object.entries(tpl).map(([k, v]) => [k, fillTemplate(v, params)]));
  return tpl;
}

/** An xid-like id (20 base32hex chars), like the real service's execution ids. */
function newExecutionId() {
  const b = Buffer.concat([Buffer.alloc(4), randomBytes(8)]);
  b.writeUInt32BE(Math.floor(Date.now() / 1000) >>> 0, 0);
  const alphabet = '0123456789abcdefghijklmnopqrstuv';
  let bits = 0;
  let acc = 0;
  let out = '';
  for (const byte of b) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(acc << (5 - bits)) & 31];
  return out.slice(0, 20);
}

// ---------- executions ----------

/**
 * An execution record: the fixed part plus `resultAt(i)` and `count`, so that the
 * 12,000-result execution is generated on read rather than stored.
 */
function makeExecution({ n, at, id, targets, failSet, dynamicParams, trigger, executor, startTime, seeded, generate }) {
  const otDef = n.objectTypes.get(at.object_type_id)?.def;
  const count = generate || targets.length;
  const targetAt = (i) => {
    if (!generate) return targets[i];
    // Synthetic pods for the bulk execution: 10.<i/65536>.<i/256 % 256>.<i % 256>.
    const row = { id: 100000 + i, pod_ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, pod_name: `batch-job-${i}`, namespace: 'batch', status: 'Running', replicas: 1 };
    return row;
  };
  const failed = (i) => (generate ? i % 100 === 99 : failSet.has(i));
  return {
    id,
    kn: n.kn.id,
    at,
    otDef,
    count,
    targetAt,
    failed,
    dynamicParams,
    trigger,
    executor,
    startTime,
    seeded, // {status, duration_ms} for data-file executions; null for live ones
    reads: 0,
  };
}

/** The stage of a live execution: 0 pending, 1 running, 2 finished. */
function stageOf(ex, now) {
  if (ex.seeded) return 2;
  return Math.min(2, Math.max(ex.reads, Math.floor((now - ex.startTime) / STEP_MS)));
}

function resultOf(ex, i, stage) {
  const row = ex.targetAt(i);
  const meta = instanceMeta(ex.otDef, ex.kn, row);
  const params = resolveParams(ex.at, row, ex.dynamicParams);
  const r = { _instance_id: meta._instance_id, _instance_identity: meta._instance_identity, _display: meta._display };
  const finishedHere = stage >= 2 || (stage === 1 && i < Math.ceil(ex.count / 2));
  const cancelled = ex.seeded && ex.seeded.status === 'cancelled';
  if (cancelled) {
    r.status = 'cancelled';
    r.parameters = params;
    return r;
  }
  if (!finishedHere) {
    r.status = 'pending';
    r.parameters = params;
    return r;
  }
  const t0 = ex.startTime + 100 + (i % 50) * 10;
  if (ex.failed(i)) {
    r.status = 'failed';
    r.parameters = params;
    r.error_message = `${ex.at.name}: ${meta._display} 执行失败 (target unreachable)`;
  } else {
    r.status = 'success';
    r.parameters = params;
    r.result = fillTemplate(ex.at.result ?? { ok: true }, params);
  }
  r.start_time = t0;
  r.end_time = t0 + 250;
  r.duration_ms = 250;
  return r;
}

/** The full ActionExecution shape (heavy fields included: the tools trim them). */
function renderExecution(ex, { offset = 0, limit = LEGACY_MAX_RESULTS, statusFilter = null, now = Date.now() } = {}) {
  const stage = stageOf(ex, now);
  let results;
  let total;
  if (statusFilter) {
    const all = [];
    for (let i = 0; i < ex.count; i++) all.push(resultOf(ex, i, stage));
    const kept = all.filter((r) => r.status === statusFilter);
    total = kept.length;
    results = kept.slice(offset, offset + limit);
  } else {
    total = ex.count;
    results = [];
    for (let i = offset; i < Math.min(ex.count, offset + limit); i++) results.push(resultOf(ex, i, stage));
  }
  let success = 0;
  let failedCount = 0;
  for (let i = 0; i < ex.count; i++) {
    const done = stage >= 2 || (stage === 1 && i < Math.ceil(ex.count / 2));
    if (!done || (ex.seeded && ex.seeded.status === 'cancelled')) continue;
    if (ex.failed(i)) failedCount += 1;
    else success += 1;
  }
  let status;
  if (ex.seeded) status = ex.seeded.status;
  else if (stage === 0) status = 'pending';
  else if (stage === 1) status = 'running';
  else status = ex.count > 0 && failedCount === ex.count ? 'failed' : 'completed';
  const finished = ['completed', 'failed', 'cancelled'].includes(status);
  const duration = ex.seeded ? ex.seeded.duration_ms : 2 * STEP_MS;
  const src = ex.at.action_source || {};
  const out = {
    id: ex.id,
    kn_id: ex.kn,
    action_type_id: ex.at.id,
    action_type_name: ex.at.name,
    action_source_type: src.type,
    action_source: src,
    object_type_id: ex.at.object_type_id,
    trigger_type: ex.trigger,
    status,
    execution_mode: 'per_instance',
    target_count: ex.count,
    total_count: ex.count,
    success_count: success,
    failed_count: failedCount,
    results,
  };
  // omitempty, like the real service: an empty page carries no total.
  if (total > 0) out.results_total = total;
  out.results_offset = offset;
  out.results_limit = limit;
  if (ex.dynamicParams && Object.keys(ex.dynamicParams).length) out.dynamic_params = ex.dynamicParams;
  out.executor_id = ex.executor.id;
  out.executor = ex.executor;
  out.start_time = ex.startTime;
  if (finished) {
    out.end_time = ex.startTime + duration;
    out.duration_ms = duration;
  }
  out.action_type_snapshot = publicActionType(ex.at);
  out.instance_identity_hash = createHash('sha256').update(`${ex.kn}/${ex.at.id}/${ex.count}`).digest('hex').slice(0, 32);
  return out;
}

/** Every execution of a network: seeded ones (built once) then live ones. */
function executionsOf(ctx, n) {
  const cache = (ctx.state.seededExecutions ||= new Map());
  if (!cache.has(n.kn.id)) {
    const list = [];
    for (const s of n.actionExecutions) {
      const at = findAction(n, s.action_type_id);
      if (!at) continue;
      const ot = n.objectTypes.get(at.object_type_id);
      const targets = (s.targets || []).map((t) => findRow(ot.rows, ot.def, t) || t);
      list.push(makeExecution({
        n, at, id: s.id, targets, failSet: new Set(s.fail || []), dynamicParams: s.dynamic_params || null,
        trigger: s.trigger_type || 'manual', executor: s.executor, startTime: s.start_time,
        seeded: { status: s.status, duration_ms: s.duration_ms ?? 1000 }, generate: s.generate || 0,
      }));
    }
    cache.set(n.kn.id, list);
  }
  const live = [...ctx.state.executions.values()].filter((e) => e.kn === n.kn.id);
  return [...cache.get(n.kn.id), ...live];
}

function executorOf(ctx) {
  const id = String(ctx.headers['x-account-id']);
  const type = String(ctx.headers['x-account-type'] || 'user');
  const names = { u_demo: 'Demo User', u_other: 'Other User', 'demo-app': 'Demo App' };
  return { id, type, name: names[id] || id };
}

// ---------- routes ----------

/** POST …/action-types/{at}: class-level or instantiated action definitions. */
export function actionInfo(ctx, n, atId) {
  const started = Date.now();
  const bad = checkSearchHeaders(ctx);
  if (bad) return bad;
  const at = findAction(n, atId);
  if (!at) return platformError(404, 'OntologyQuery.ActionType.NotFound', `action type ${atId} not found in knowledge network ${n.kn.id}`, ctx.lang);
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, ctx.lang);
  const body = parsed.value;
  if (!isPlainObject(body)) return platformError(400, INVALID, 'request body must be a JSON object', ctx.lang);
  for (const k of Object.keys(body)) {
    if (k !== '_instance_identities') return platformError(400, INVALID, `unknown field "${k}"`, ctx.lang);
  }
  const ids = body._instance_identities ?? [];
  if (!Array.isArray(ids) || !ids.every(isPlainObject)) {
    return platformError(400, INVALID, '_instance_identities must be an array of objects', ctx.lang);
  }
  const ot = n.objectTypes.get(at.object_type_id);
  const access = applyAccess(ot.def, ot.rows, String(ctx.headers['x-account-id']));
  if (access.refused) {
    return platformError(403, 'Public.Forbidden', `Public.Forbidden: query_data was not granted for object_type:${n.kn.id}/${ot.def.id}`, ctx.lang);
  }
  const inputs = {};
  for (const p of at.parameters || []) {
    if (p.value_from === 'input') inputs[p.name] = { type: p.type, value_from: 'input', required: p.required !== false, comment: p.comment ?? '' };
  }
  const actions = [];
  if (ids.length === 0) {
    // Class level: the constants only; property values need instances.
    actions.push({ parameters: resolveParams(at, null, null), dynamic_params: inputs });
  } else {
    for (const identity of ids) {
      const row = findRow(access.rows, ot.def, identity);
      if (!row) continue; // unknown or filtered-out instances produce no action
      const meta = instanceMeta(ot.def, n.kn.id, row);
      actions.push({
        _instance_id: meta._instance_id,
        _instance_identity: meta._instance_identity,
        display: meta._display,
        parameters: resolveParams(at, row, null),
        dynamic_params: inputs,
      });
    }
  }
  return json(200, {
    action_type: publicActionType(at),
    action_source: at.action_source ?? null,
    actions,
    total_count: actions.length,
    overall_ms: Date.now() - started,
  });
}

/** POST …/action-types/{at}/execute: accept at once, run in the background. */
export function executeAction(ctx, n, atId) {
  const { lang } = ctx;
  const ct = String(ctx.headers['content-type'] || '').toLowerCase();
  if (!/^application\/json\s*(;|$)/.test(ct)) {
    return platformError(406, 'OntologyQuery.InvalidRequestHeader.ContentType', `Content-Type must be application/json, got "${ct}"`, lang);
  }
  const at = findAction(n, atId);
  if (!at) return platformError(404, 'OntologyQuery.ActionType.NotFound', `action type ${atId} not found in knowledge network ${n.kn.id}`, lang);
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, lang);
  const body = parsed.value;
  const ot = n.objectTypes.get(at.object_type_id);
  let targets;
  let dynamic;
  let trigger;
  try {
    if (!isPlainObject(body)) throw new BadRequest('request body must be a JSON object');
    for (const k of Object.keys(body)) {
      if (!['_instance_identities', 'dynamic_params', 'trigger_type'].includes(k)) throw new BadRequest(`unknown field "${k}"`);
    }
    trigger = body.trigger_type ?? 'manual';
    if (!TRIGGERS.includes(trigger)) throw new BadRequest(`trigger_type must be one of ${TRIGGERS.join(', ')}`);
    dynamic = body.dynamic_params ?? {};
    if (!isPlainObject(dynamic)) throw new BadRequest('dynamic_params must be an object');
    const missing = (at.parameters || []).filter((p) => p.value_from === 'input' && p.required !== false && (dynamic[p.name] === undefined || dynamic[p.name] === null));
    if (missing.length) throw new BadRequest(`missing dynamic params: ${missing.map((p) => p.name).join(', ')}`);
    for (const p of at.parameters || []) {
      const v = dynamic[p.name];
      if (p.value_from !== 'input' || v === undefined || v === null) continue;
      const ok = p.type === 'integer' ? (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint' : p.type === 'string' ? typeof v === 'string' : true;
      if (!ok) throw new BadRequest(`dynamic param ${p.name} must be of type ${p.type}`);
    }
    const ids = body._instance_identities ?? [];
    if (!Array.isArray(ids)) throw new BadRequest('_instance_identities must be an array');
    const access = applyAccess(ot.def, ot.rows, String(ctx.headers['x-account-id']));
    if (access.refused) {
      return platformError(403, 'Public.Forbidden', `Public.Forbidden: query_data was not granted for object_type:${n.kn.id}/${ot.def.id}`, lang);
    }
    if (ids.length === 0) {
      // Empty means "scan by the action's own condition", not "do nothing".
      targets = access.rows.filter((r) => evaluate(at.condition ?? null, r).ok);
    } else {
      targets = ids.map((identity, i) => {
        if (!isPlainObject(identity) || Object.keys(identity).length === 0) throw new BadRequest(`_instance_identities[${i}] must be a non-empty object`);
        const row = findRow(access.rows, ot.def, identity);
        if (!row) throw new BadRequest(`_instance_identities[${i}]: no ${ot.def.id} instance has this identity`);
        return row;
      });
    }
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, lang);
    throw e;
  }
  const failSet = new Set();
  targets.forEach((r, i) => {
    if (r.status === 'Unknown') failSet.add(i); // an unreachable target fails (demo rule)
  });
  const id = newExecutionId();
  const now = Date.now();
  const ex = makeExecution({ n, at, id, targets, failSet, dynamicParams: Object.keys(dynamic).length ? dynamic : null, trigger, executor: executorOf(ctx), startTime: now, seeded: null, generate: 0 });
  ctx.state.executions.set(id, ex);
  return json(200, {
    execution_id: id,
    status: 'pending',
    message: lang === 'en' ? 'Action execution accepted' : '行动执行已受理',
    created_at: now,
  });
}

function findExecution(ctx, n, id) {
  return executionsOf(ctx, n).find((e) => e.id === id) || null;
}

/** Reads move a live execution one step forward (so polling tools see progress). */
function touch(ex) {
  if (!ex.seeded) ex.reads += 1;
}

/** GET …/action-executions/{id}: legacy, the first 1000 results. */
export function getExecutionLegacy(ctx, n, id) {
  const ex = findExecution(ctx, n, id);
  if (!ex) return platformError(404, 'OntologyQuery.ActionExecution.NotFound', `action execution ${id} not found`, ctx.lang);
  const body = renderExecution(ex, { offset: 0, limit: LEGACY_MAX_RESULTS });
  touch(ex);
  return json(200, body);
}

const intOf = (q, name) => {
  const raw = q.get(name);
  if (raw === null || raw === '') return undefined;
  if (!/^-?\d{1,15}$/.test(raw)) throw new BadRequest(`${name} must be an integer, got "${raw}"`);
  return Number(raw);
};

/** GET …/action-logs/{id}?results_limit&results_offset&results_status: paged results. */
export function getExecutionPaged(ctx, n, id) {
  let limit;
  let offset;
  let statusFilter;
  try {
    limit = intOf(ctx.query, 'results_limit') ?? 0;
    offset = intOf(ctx.query, 'results_offset') ?? 0;
    statusFilter = ctx.query.get('results_status') || null;
    if (statusFilter && !['success', 'failed'].includes(statusFilter)) throw new BadRequest('results_status must be success or failed');
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, EXEC_INVALID, e.message, ctx.lang);
    throw e;
  }
  if (limit <= 0) limit = 100;
  if (limit > 1000) limit = 1000;
  if (offset < 0) offset = 0;
  if (offset >= RESULTS_WINDOW) {
    return platformError(400, EXEC_INVALID,
      `results_offset ${offset} is out of range: results can be paged only within the first ${RESULTS_WINDOW} (results_offset + results_limit <= ${RESULTS_WINDOW}); this interface cannot page past ${RESULTS_WINDOW} results`,
      ctx.lang);
  }
  const ex = findExecution(ctx, n, id);
  if (!ex) return platformError(404, 'OntologyQuery.ActionExecution.NotFound', `action execution ${id} not found`, ctx.lang);
  const page = Math.min(limit, RESULTS_WINDOW - offset); // offset + page <= 10000
  const body = renderExecution(ex, { offset, limit: page, statusFilter });
  touch(ex);
  return json(200, body);
}

/** GET …/action-logs: history with filters, offset or search_after. */
export function listExecutions(ctx, n) {
  const q = ctx.query;
  let f;
  try {
    f = {
      actionTypeId: q.get('action_type_id') || null,
      status: q.get('status') || null,
      trigger: q.get('trigger_type') || null,
      from: intOf(q, 'start_time_from'),
      to: intOf(q, 'start_time_to'),
      offset: intOf(q, 'offset') ?? 0,
      limit: intOf(q, 'limit') ?? 0,
      cursor: q.get('search_after') ? q.get('search_after').split(',') : null,
      needTotal: q.get('need_total') === 'true',
    };
    if (f.status && !STATUSES.includes(f.status)) throw new BadRequest(`status must be one of ${STATUSES.join(', ')}`);
    if (f.trigger && !TRIGGERS.includes(f.trigger)) throw new BadRequest(`trigger_type must be one of ${TRIGGERS.join(', ')}`);
    if (f.offset < 0) throw new BadRequest('offset must be a non-negative integer');
    // The cursor is [start_time, id] of the last entry, sent comma-joined as strings.
    if (f.cursor && f.cursor.length !== 2) throw new BadRequest(`search_after must have 2 values (start_time,id), got ${f.cursor.length}`);
    if (f.cursor && !/^-?\d+$/.test(f.cursor[0])) throw new BadRequest(`search_after[0] must be a start_time, got "${f.cursor[0]}"`);
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, EXEC_INVALID, e.message, ctx.lang);
    throw e;
  }
  if (f.limit <= 0) f.limit = 20;
  if (f.limit > 1000) f.limit = 1000;
  const now = Date.now();
  let rows = executionsOf(ctx, n)
    .map((ex) => ({ ex, view: renderExecution(ex, { offset: 0, limit: 100, now }) }))
    .filter(({ view }) =>
      (!f.actionTypeId || view.action_type_id === f.actionTypeId) &&
      (!f.status || view.status === f.status) &&
      (!f.trigger || view.trigger_type === f.trigger) &&
      (f.from === undefined || view.start_time >= f.from) &&
      (f.to === undefined || view.start_time <= f.to));
  // Newest first; the id breaks ties so the cursor is a total order.
  const order = (a, b) => b.view.start_time - a.view.start_time || (a.view.id < b.view.id ? 1 : a.view.id > b.view.id ? -1 : 0);
  rows.sort(order);
  const total = rows.length;
  if (f.cursor) {
    const st = Number(f.cursor[0]);
    const cid = f.cursor[1];
    rows = rows.filter(({ view }) => view.start_time < st || (view.start_time === st && view.id < cid));
  }
  const page = rows.slice(f.cursor ? 0 : f.offset, (f.cursor ? 0 : f.offset) + f.limit);
  const body = { entries: page.map((r) => r.view) };
  if (f.needTotal && total > 0) body.total_count = total;
  if (page.length) {
    const last = page[page.length - 1].view;
    body.search_after = [last.start_time, last.id];
  }
  return json(200, body);
}

export function resetActions(state) {
  state.executions = new Map();
  state.seededExecutions = new Map();
}
