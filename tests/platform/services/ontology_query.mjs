// ontology-query, internal face (see ../README.md). Under
// /api/ontology-query/in/v1/knowledge-networks/{kn}/:
//   POST object-types/{ot}              instance search (x-http-method-override: GET)
//   GET  object-types/{ot}/schema       visibility probe (permission_guidance)
//   POST object-types/{ot}/properties   logic property values (override GET)
//   POST subgraph?query_type=relation_path
//   POST subgraph?query_type=          exploration (ontology_explore.mjs)
//   POST metrics/{metric_id}/data      metric data (ontology_explore.mjs)
//   actions and executions: see ontology_actions.mjs

import { createHash } from 'node:crypto';
import { json, platformError, parseBody, isPlainObject } from '../lib/http.mjs';
import { isNumeric, compareNumeric, parse as parseJson } from '../lib/json.mjs';
import { publicObjectType } from '../lib/dataset.mjs';
import { actionInfo, executeAction, getExecutionLegacy, getExecutionPaged, listExecutions, resetActions } from './ontology_actions.mjs';
import { explore, metricData } from './ontology_explore.mjs';

const BASE = '/api/ontology-query/in/v1/knowledge-networks/';
const INVALID = 'OntologyQuery.ObjectType.InvalidParameter';
const META_KEYS = ['_instance_id', '_instance_identity', '_display'];
const BODY_KEYS = ['condition', 'limit', 'properties', 'sort', 'need_total', 'search_after', 'offset'];

class BadRequest extends Error {}

// ---------- value comparison ----------

// A string that is a JSON number compares numerically against numbers (the
// gateway may send numeric ids as strings, and search_after values as strings).
function numericOf(v) {
  if (isNumeric(v)) return v;
  if (typeof v === 'string' && /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(v)) return parseJson(v);
  return null;
}

/** Total order over JSON scalars; null when the two are not comparable. */
function compare(a, b) {
  if (isNumeric(a) || isNumeric(b)) {
    const x = numericOf(a);
    const y = numericOf(b);
    return x === null || y === null ? null : compareNumeric(x, y);
  }
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return a === b ? 0 : a ? 1 : -1;
  return null;
}

const equal = (a, b) => compare(a, b) === 0;

// Array-valued fields match when any element matches (search-index semantics).
const anyOf = (v, pred) => (Array.isArray(v) ? v.some(pred) : pred(v));

const present = (v) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);

function stringsOf(row, field) {
  if (field === '*') return Object.values(row).flatMap((v) => (Array.isArray(v) ? v : [v])).filter((v) => typeof v === 'string');
  const v = row[field];
  return (Array.isArray(v) ? v : [v]).filter((x) => typeof x === 'string' || isNumeric(x)).map(String);
}

// ---------- condition evaluation ----------

/** Check a condition tree once up front; throws BadRequest with a reason. */
function validateCondition(c, path = 'condition') {
  if (c === null || c === undefined) return;
  if (!isPlainObject(c)) throw new BadRequest(`${path} must be an object`);
  const op = c.operation;
  if (typeof op !== 'string' || op === '') throw new BadRequest(`${path}.operation is required`);
  if (op === 'and' || op === 'or') {
    if (c.sub_conditions !== undefined && c.sub_conditions !== null && !Array.isArray(c.sub_conditions)) {
      throw new BadRequest(`${path}.sub_conditions must be an array`);
    }
    (c.sub_conditions || []).forEach((s, i) => validateCondition(s, `${path}.sub_conditions[${i}]`));
    return;
  }
  if (!OPS[op]) throw new BadRequest(`${path}: unsupported operation "${op}"`);
  if (typeof c.field !== 'string' || c.field === '') throw new BadRequest(`${path}.field is required for "${op}"`);
  if (c.value_from !== undefined && c.value_from !== null && c.value_from !== '' && c.value_from !== 'const') {
    throw new BadRequest(`${path}.value_from "${c.value_from}" is not supported (only const)`);
  }
  if ((op === 'in' || op === 'not_in') && !Array.isArray(c.value)) throw new BadRequest(`${path}: "${op}" needs an array value`);
  if (op === 'range' && !(Array.isArray(c.value) && c.value.length === 2)) {
    throw new BadRequest(`${path}: "range" needs a [from, to] value`);
  }
  if (op === 'regex') {
    if (typeof c.value !== 'string') throw new BadRequest(`${path}: "regex" needs a string value`);
    try {
      new RegExp(c.value, 'u');
    } catch (e) {
      throw new BadRequest(`${path}: invalid regex: ${e.message}`);
    }
  }
}

// ---------- relevance (match: keyword channel, knn: vector channel) ----------

/** Lower-case words (2+ characters) and CJK bigrams (a one-character run stays whole),
 *  with repeats: the token model of the keyword index and of the stand-in embedding. */
function tokens(text) {
  const out = [];
  const s = String(text).toLowerCase();
  for (const w of s.match(/[a-z0-9_]{2,}/g) || []) out.push(w);
  for (const run of s.match(/[\u3400-\u9fff]+/g) || []) {
    if (run.length === 1) out.push(run);
    for (let i = 0; i + 1 < run.length; i++) out.push(run.slice(i, i + 2));
  }
  return out;
}

const round4 = (x) => Math.round(x * 10000) / 10000;

/** BM25 (k1 1.2, b 0.75) of the query's tokens in each row's field text, over the rows. */
function bm25Scores(rows, field, query) {
  const docs = rows.map((r) => tokens(stringsOf(r, field).join(' ')));
  const avg = docs.reduce((n, d) => n + d.length, 0) / Math.max(docs.length, 1) || 1;
  const q = [...new Set(tokens(query))];
  const df = new Map(q.map((t) => [t, docs.filter((d) => d.includes(t)).length]));
  return docs.map((d) => {
    let score = 0;
    for (const t of q) {
      const tf = d.filter((x) => x === t).length;
      if (!tf) continue;
      const idf = Math.log(1 + (docs.length - df.get(t) + 0.5) / (df.get(t) + 0.5));
      score += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * d.length) / avg));
    }
    return score;
  });
}

/** Similarity of the query to the best of the field's strings: Dice over token sets, 0..1. */
function similarity(row, field, query) {
  const q = new Set(tokens(query));
  if (q.size === 0) return 0;
  let best = 0;
  for (const s of stringsOf(row, field)) {
    const d = new Set(tokens(s));
    let both = 0;
    for (const t of q) if (d.has(t)) both += 1;
    best = Math.max(best, (2 * both) / (q.size + d.size));
  }
  return best;
}

// The relevance of each match/knn leaf over the rows of one search, set by prepare:
// leaf -> Map(row -> score). A leaf without it (subgraph paths) falls back to the
// plain substring test with score 1.
const RELEVANCE = new WeakMap();

/** Scores every match/knn leaf of the condition over rows. A match leaf matches the
 *  rows that contain the query (case-insensitive) or any of its tokens, and scores
 *  1 + their BM25; a knn
 *  leaf matches the k rows (limit_value) most similar to the query (similarity > 0)
 *  and scores that similarity. */
function prepare(c, rows) {
  if (!isPlainObject(c)) return;
  if (c.operation === 'and' || c.operation === 'or') {
    for (const s of c.sub_conditions || []) prepare(s, rows);
    return;
  }
  if (c.operation === 'match') {
    const bm = bm25Scores(rows, c.field, c.value ?? '');
    const m = new Map();
    rows.forEach((r, i) => { if (bm[i] > 0 || substring(r, c, true)) m.set(r, round4(1 + bm[i])); });
    RELEVANCE.set(c, m);
  } else if (c.operation === 'knn') {
    const scored = rows.map((r, i) => ({ r, i, s: similarity(r, c.field, c.value ?? '') })).filter((x) => x.s > 0);
    scored.sort((a, b) => b.s - a.s || a.i - b.i);
    const k = Number.isInteger(c.limit_value) && c.limit_value > 0 ? c.limit_value : scored.length;
    RELEVANCE.set(c, new Map(scored.slice(0, k).map((x) => [x.r, round4(x.s)])));
  }
}

const substring = (row, c, fold) => {
  const needle = fold ? String(c.value ?? '').toLowerCase() : String(c.value ?? '');
  return stringsOf(row, c.field).some((s) => (fold ? s.toLowerCase() : s).includes(needle));
};

const OPS = {
  '==': (row, c) => anyOf(row[c.field], (v) => equal(v, c.value)),
  '!=': (row, c) => !anyOf(row[c.field], (v) => equal(v, c.value)),
  '>': (row, c) => anyOf(row[c.field], (v) => compare(v, c.value) > 0),
  '>=': (row, c) => anyOf(row[c.field], (v) => compare(v, c.value) >= 0),
  '<': (row, c) => anyOf(row[c.field], (v) => { const r = compare(v, c.value); return r !== null && r < 0; }),
  '<=': (row, c) => anyOf(row[c.field], (v) => { const r = compare(v, c.value); return r !== null && r <= 0; }),
  in: (row, c) => anyOf(row[c.field], (v) => c.value.some((w) => equal(v, w))),
  not_in: (row, c) => !anyOf(row[c.field], (v) => c.value.some((w) => equal(v, w))),
  // Inclusive on both ends; a null bound is open.
  range: (row, c) =>
    anyOf(row[c.field], (v) => {
      const [lo, hi] = c.value;
      const a = lo === null ? 1 : compare(v, lo);
      const b = hi === null ? -1 : compare(v, hi);
      return a !== null && b !== null && a >= 0 && b <= 0;
    }),
  like: (row, c) => substring(row, c, false),
  not_like: (row, c) => !substring(row, c, false),
  match: (row, c) => substring(row, c, true),
  knn: (row, c) => substring(row, c, true),
  exist: (row, c) => present(row[c.field]),
  not_exist: (row, c) => !present(row[c.field]),
  regex: (row, c) => {
    const re = new RegExp(c.value, 'u');
    return stringsOf(row, c.field).some((s) => re.test(s));
  },
};

/** Evaluate; returns {ok, score} where score counts satisfied match/knn leaves. */
function evaluate(c, row) {
  if (c === null || c === undefined) return { ok: true, score: 0 };
  if (c.operation === 'and' || c.operation === 'or') {
    const subs = (c.sub_conditions || []).filter((s) => s !== null && s !== undefined);
    if (subs.length === 0) return { ok: true, score: 0 };
    let score = 0;
    if (c.operation === 'and') {
      for (const s of subs) {
        const r = evaluate(s, row);
        if (!r.ok) return { ok: false, score: 0 };
        score += r.score;
      }
      return { ok: true, score };
    }
    let ok = false;
    for (const s of subs) {
      const r = evaluate(s, row);
      if (r.ok) {
        ok = true;
        score += r.score;
      }
    }
    return { ok, score };
  }
  const rel = RELEVANCE.get(c);
  if (rel) return rel.has(row) ? { ok: true, score: rel.get(row) } : { ok: false, score: 0 };
  const ok = OPS[c.operation](row, c);
  return { ok, score: ok && (c.operation === 'match' || c.operation === 'knn') ? 1 : 0 };
}

function usesRelevance(c) {
  if (!c) return false;
  if (c.operation === 'match' || c.operation === 'knn') return true;
  return (c.sub_conditions || []).some(usesRelevance);
}

// ---------- request validation ----------

function validateBody(body, def) {
  if (!isPlainObject(body)) throw new BadRequest('request body must be a JSON object');
  for (const k of Object.keys(body)) {
    if (!BODY_KEYS.includes(k)) throw new BadRequest(`unknown field "${k}"`);
  }
  validateCondition(body.condition);

  const searchAfter = body.search_after ?? null;
  if (searchAfter !== null && !Array.isArray(searchAfter)) throw new BadRequest('search_after must be an array');
  const cursor = searchAfter && searchAfter.length ? searchAfter : null;

  let limit = body.limit ?? 0;
  if (!(typeof limit === 'number' && Number.isInteger(limit))) throw new BadRequest('limit must be an integer');
  if (limit === 0) limit = cursor ? 10000 : 10;
  if (limit < 1 || limit > 10000) throw new BadRequest(`limit ${limit} out of range [1, 10000]`);

  const offset = body.offset ?? 0;
  if (!(typeof offset === 'number' && Number.isInteger(offset) && offset >= 0)) throw new BadRequest('offset must be a non-negative integer');

  const sort = body.sort ?? [];
  if (!Array.isArray(sort)) throw new BadRequest('sort must be an array');
  sort.forEach((s, i) => {
    if (!isPlainObject(s)) throw new BadRequest(`sort[${i}] must be an object`);
    if (typeof s.field !== 'string' || s.field === '') throw new BadRequest(`sort[${i}].field is required`);
    if (s.direction !== 'asc' && s.direction !== 'desc') throw new BadRequest(`sort[${i}].direction must be asc or desc`);
  });

  const properties = body.properties ?? null;
  if (properties !== null && !(Array.isArray(properties) && properties.every((p) => typeof p === 'string'))) {
    throw new BadRequest('properties must be an array of strings');
  }
  if (body.need_total !== undefined && body.need_total !== null && typeof body.need_total !== 'boolean') {
    throw new BadRequest('need_total must be a boolean');
  }

  // Results are totally ordered: the requested sort, then (index path) _score desc
  // when relevance is used, then the primary keys ascending as the tie-breaker.
  const order = sort.map((s) => ({ field: s.field, direction: s.direction }));
  const has = (f) => order.some((o) => o.field === f);
  if (order.length === 0 && usesRelevance(body.condition)) order.push({ field: '_score', direction: 'desc' });
  for (const pk of def.primary_keys) if (!has(pk)) order.push({ field: pk, direction: 'asc' });
  if (cursor && cursor.length !== order.length) {
    throw new BadRequest(`search_after has ${cursor.length} values, expected ${order.length} (one per sort key)`);
  }
  return {
    condition: body.condition ?? null,
    limit,
    offset: cursor ? 0 : offset, // offset is ignored with search_after
    order,
    cursor,
    properties: properties && properties.length ? properties : null,
    needTotal: cursor ? false : body.need_total === true,
  };
}

// Missing values sort last in both directions (search-index behaviour).
function compareBy(order, a, b) {
  for (const { field, direction } of order) {
    const x = a[field];
    const y = b[field];
    const mx = x === undefined || x === null;
    const my = y === undefined || y === null;
    if (mx || my) {
      if (mx && my) continue;
      return mx ? 1 : -1;
    }
    const c = compare(x, y) ?? compare(String(x), String(y));
    if (c) return direction === 'desc' ? -c : c;
  }
  return 0;
}

// ---------- access control (ot_patient) ----------

function mask(v) {
  if (typeof v !== 'string') return '***';
  return v.length >= 7 ? v.slice(0, 3) + '****' + v.slice(-4) : '****';
}

/** {refused} | {rows, permissions?, rowFilter?} for the caller. */
function applyAccess(def, rows, accountId) {
  if (!def.access) return { rows };
  const grant = Object.prototype.hasOwnProperty.call(def.access, accountId) ? def.access[accountId] : null;
  // query_data: false = may view the definition (schema probe) but not query the data.
  if (!grant || grant.query_data === false) return { refused: true };
  const masked = new Set(grant.masked || []);
  let out = rows.map((r) => {
    const m = { ...r };
    for (const k of masked) if (k in m) m[k] = mask(m[k]);
    return m;
  });
  if (grant.row_filter) out = out.filter((r) => evaluate(grant.row_filter, r).ok);
  const permissions = {};
  for (const p of def.data_properties) permissions[p.name] = masked.has(p.name) ? 'masked' : 'full';
  return { rows: out, permissions, rowFilter: Boolean(grant.row_filter) };
}

// ---------- the search ----------

function instanceMeta(def, kn, row) {
  const identity = {};
  for (const pk of def.primary_keys) identity[pk] = row[pk];
  const idText = def.primary_keys.map((pk) => String(row[pk])).join('_');
  return {
    _instance_id: `${kn}-${def.id}-${idText}`,
    _instance_identity: identity,
    _display: row[def.display_key] === undefined ? idText : String(row[def.display_key]),
  };
}

/** The POST-as-GET checks shared by the search endpoints; an error reply or null. */
function checkSearchHeaders(ctx) {
  const ct = String(ctx.headers['content-type'] || '').toLowerCase();
  if (!/^application\/json\s*(;|$)/.test(ct)) {
    return platformError(406, 'OntologyQuery.InvalidRequestHeader.ContentType', `Content-Type must be application/json, got "${ct}"`, ctx.lang);
  }
  const override = String(ctx.headers['x-http-method-override'] || '').toUpperCase();
  if (override !== 'GET') {
    return platformError(400, 'OntologyQuery.InvalidRequestHeader.MethodOverride', 'x-http-method-override must be GET', ctx.lang);
  }
  return null;
}

const forbidden = (ctx, knId, otId) =>
  platformError(403, 'Public.Forbidden', `Public.Forbidden: query_data was not granted for object_type:${knId}/${otId}`, ctx.lang);

function search(ctx, knId, otId) {
  const started = Date.now();
  const { lang } = ctx;
  const badHeaders = checkSearchHeaders(ctx);
  if (badHeaders) return badHeaders;
  const n = ctx.dataset.network(knId);
  if (!n) return platformError(404, 'OntologyQuery.KnowledgeNetwork.NotFound', `knowledge network ${knId} not found`, lang);
  const ot = n.objectTypes.get(otId);
  if (!ot) return platformError(404, 'OntologyQuery.ObjectType.NotFound', `object type ${otId} not found in knowledge network ${knId}`, lang);

  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, lang);
  let req;
  try {
    req = validateBody(parsed.value, ot.def);
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, lang);
    throw e;
  }

  const access = applyAccess(ot.def, ot.rows, String(ctx.headers['x-account-id']));
  if (access.refused) return forbidden(ctx, knId, otId);

  const relevance = usesRelevance(req.condition);
  if (relevance) prepare(req.condition, access.rows);
  let hits = [];
  for (const row of access.rows) {
    const r = evaluate(req.condition, row);
    if (r.ok) hits.push({ ...row, _score: relevance ? round4(r.score) : 0 });
  }
  hits.sort((a, b) => compareBy(req.order, a, b));
  const total = hits.length;
  if (req.cursor) {
    const cur = {};
    req.order.forEach((o, i) => (cur[o.field] = req.cursor[i]));
    hits = hits.filter((h) => compareBy(req.order, h, cur) > 0);
  }
  const page = hits.slice(req.offset, req.offset + req.limit);

  const datas = page.map((h) => {
    const out = {};
    for (const [k, v] of Object.entries(h)) {
      if (k === '_score') continue;
      if (req.properties && !req.properties.includes(k)) continue;
      out[k] = v;
    }
    Object.assign(out, instanceMeta(ot.def, knId, h));
    out._score = h._score;
    return out;
  });

  const body = {};
  if (ctx.query.get('include_type_info') === 'true') body.object_type = publicObjectType(ot.def);
  body.datas = datas;
  if (req.needTotal && total > 0) body.total_count = total;
  if (page.length > 0) body.search_after = req.order.map((o) => page[page.length - 1][o.field] ?? null);
  if (access.permissions) {
    const perms = {};
    for (const [k, v] of Object.entries(access.permissions)) {
      if (!req.properties || req.properties.includes(k)) perms[k] = v;
    }
    body.effective_permissions = perms;
  }
  if (access.rowFilter) body.row_filter_applied = true;
  body.overall_ms = Date.now() - started;
  body.search_from_index = true;
  return json(200, body);
}

// ---------- schema probe (permission_guidance visibility) ----------

/** GET object-types/{ot}/schema: 2xx means the caller may view the definition. */
function schemaProbe(ctx, n, otId) {
  const ot = n.objectTypes.get(otId);
  if (!ot) return platformError(404, 'OntologyQuery.ObjectType.NotFound', `object type ${otId} not found in knowledge network ${n.kn.id}`, ctx.lang);
  const account = String(ctx.headers['x-account-id']);
  const def = ot.def;
  const grant = def.access ? (Object.prototype.hasOwnProperty.call(def.access, account) ? def.access[account] : null) : {};
  if (!grant) return forbidden(ctx, n.kn.id, otId);
  const masked = new Set(grant.masked || []);
  const viewOnly = grant.query_data === false;
  const perms = {};
  for (const p of def.data_properties) perms[p.name] = viewOnly ? 'schema' : masked.has(p.name) ? 'masked' : 'full';
  const props = publicObjectType(def).data_properties.map((p) => {
    if (perms[p.name] === 'full') return p;
    const q = { ...p };
    delete q.condition_operations; // withheld values cannot be filtered on
    return q;
  });
  return json(200, { schema_definition: props, effective_permissions: perms });
}

// ---------- logic properties ----------

const STEPS = { day: 86400000, week: 7 * 86400000, month: 30 * 86400000, quarter: 91 * 86400000, year: 365 * 86400000 };

// Deterministic pseudo-values: the same instance and property always give the same number.
function seed(...parts) {
  return createHash('sha256').update(parts.join('|')).digest().readUInt32BE(0);
}

/** The value of one logic property for one row; throws BadRequest on bad params. */
function logicValue(lp, row, instanceId, params) {
  const inputs = (lp.parameters || []).filter((p) => p.value_from === 'input');
  const missing = inputs.filter((p) => params[p.name] === undefined || params[p.name] === null).map((p) => p.name);
  if (missing.length) throw new BadRequest(`missing dynamic params for ${lp.name}: ${missing.join(', ')}`);
  const h = seed(instanceId, lp.name);
  if (lp.type === 'metric') {
    for (const k of ['start', 'end']) {
      if (!(typeof params[k] === 'number' && Number.isInteger(params[k]))) throw new BadRequest(`${lp.name}.${k} must be an integer timestamp in ms`);
    }
    if (params.end < params.start) throw new BadRequest(`${lp.name}: end is before start`);
    const step = params.step ?? null;
    if (step !== null && !STEPS[step]) throw new BadRequest(`${lp.name}.step must be one of ${Object.keys(STEPS).join(', ')}`);
    if (params.instant === true || step === null) return h % 1000;
    const points = [];
    for (let t = params.start, i = 0; t <= params.end && i < 120; t += STEPS[step], i++) {
      points.push({ time: t, value: seed(instanceId, lp.name, t) % 1000 });
    }
    return points;
  }
  // Tool-backed: the tool's answer, built from its resolved parameters.
  const resolved = {};
  for (const p of lp.parameters || []) resolved[p.name] = p.value_from === 'property' ? row[p.value] ?? null : params[p.name];
  return { risk_level: ['low', 'medium', 'high'][h % 3], score: h % 100, ...resolved };
}

/** POST object-types/{ot}/properties: values of logic properties for given instances. */
function logicProperties(ctx, n, otId) {
  const started = Date.now();
  const badHeaders = checkSearchHeaders(ctx);
  if (badHeaders) return badHeaders;
  const ot = n.objectTypes.get(otId);
  if (!ot) return platformError(404, 'OntologyQuery.ObjectType.NotFound', `object type ${otId} not found in knowledge network ${n.kn.id}`, ctx.lang);
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, ctx.lang);
  const body = parsed.value;
  const access = applyAccess(ot.def, ot.rows, String(ctx.headers['x-account-id']));
  let datas;
  try {
    if (!isPlainObject(body)) throw new BadRequest('request body must be a JSON object');
    for (const k of Object.keys(body)) {
      if (!['_instance_identities', 'properties', 'dynamic_params'].includes(k)) throw new BadRequest(`unknown field "${k}"`);
    }
    const ids = body._instance_identities;
    if (!Array.isArray(ids) || ids.length === 0 || !ids.every(isPlainObject)) throw new BadRequest('_instance_identities must be a non-empty array of objects');
    const props = body.properties;
    if (!Array.isArray(props) || props.length === 0 || !props.every((p) => typeof p === 'string')) throw new BadRequest('properties must be a non-empty array of strings');
    const dyn = body.dynamic_params ?? {};
    if (!isPlainObject(dyn)) throw new BadRequest('dynamic_params must be an object');
    const lps = ot.def.logic_properties || [];
    const unknown = props.filter((p) => !lps.some((l) => l.name === p));
    if (unknown.length) throw new BadRequest(`logic properties not found: ${unknown.join(', ')} (available: ${lps.map((l) => l.name).join(', ')})`);
    if (access.refused) return forbidden(ctx, n.kn.id, otId);
    datas = [];
    for (const identity of ids) {
      const row = access.rows.find((r) => ot.def.primary_keys.every((pk) => pk in identity && compare(r[pk], identity[pk]) === 0));
      if (!row) continue; // unknown, or outside the caller's row filter
      const meta = instanceMeta(ot.def, n.kn.id, row);
      const out = {};
      for (const pk of ot.def.primary_keys) out[pk] = row[pk];
      for (const name of props) {
        const p = dyn[name] ?? {};
        if (!isPlainObject(p)) throw new BadRequest(`dynamic_params.${name} must be an object`);
        out[name] = logicValue(lps.find((l) => l.name === name), row, meta._instance_id, p);
      }
      Object.assign(out, meta);
      datas.push(out);
    }
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, ctx.lang);
    throw e;
  }
  const reply = { datas };
  if (access.permissions) reply.effective_permissions = access.permissions;
  if (access.rowFilter) reply.row_filter_applied = true;
  reply.overall_ms = Date.now() - started;
  return json(200, reply);
}

// ---------- subgraph by relation paths ----------

const MAX_EDGES = 10;

function validatePath(n, p, i) {
  const at = `relation_type_paths[${i}]`;
  if (!isPlainObject(p)) throw new BadRequest(`${at} must be an object`);
  for (const k of Object.keys(p)) if (!['object_types', 'relation_types', 'limit'].includes(k)) throw new BadRequest(`${at}: unknown field "${k}"`);
  const nodes = p.object_types;
  const edges = p.relation_types;
  if (!Array.isArray(edges) || edges.length === 0) throw new BadRequest(`${at}.relation_types must be a non-empty array`);
  if (edges.length > MAX_EDGES) throw new BadRequest(`${at}: at most ${MAX_EDGES} relation types per path`);
  if (!Array.isArray(nodes) || nodes.length !== edges.length + 1) throw new BadRequest(`${at}.object_types must have one more entry than relation_types`);
  let limit = p.limit ?? 0;
  if (!(typeof limit === 'number' && Number.isInteger(limit) && limit >= 0)) throw new BadRequest(`${at}.limit must be a non-negative integer`);
  if (limit === 0) limit = 2000;
  const steps = edges.map((e, j) => {
    const where = `${at}.relation_types[${j}]`;
    if (!isPlainObject(e) || !e.relation_type_id || !e.source_object_type_id || !e.target_object_type_id) {
      throw new BadRequest(`${where} needs relation_type_id, source_object_type_id and target_object_type_id`);
    }
    const rt = n.relationTypes.find((r) => r.id === e.relation_type_id);
    if (!rt) throw new NotFound('OntologyQuery.RelationType.NotFound', `relation type ${e.relation_type_id} not found in knowledge network ${n.kn.id}`);
    let forward;
    if (rt.source_object_type_id === e.source_object_type_id && rt.target_object_type_id === e.target_object_type_id) forward = true;
    else if (rt.source_object_type_id === e.target_object_type_id && rt.target_object_type_id === e.source_object_type_id) forward = false;
    else throw new BadRequest(`${where}: ${e.source_object_type_id} -> ${e.target_object_type_id} does not match relation type ${rt.id} (${rt.source_object_type_id} -> ${rt.target_object_type_id})`);
    if (!isPlainObject(nodes[j]) || nodes[j].id !== e.source_object_type_id) throw new BadRequest(`${at}.object_types[${j}].id must be ${e.source_object_type_id}`);
    if (!isPlainObject(nodes[j + 1]) || nodes[j + 1].id !== e.target_object_type_id) throw new BadRequest(`${at}.object_types[${j + 1}].id must be ${e.target_object_type_id}`);
    return { rt, forward };
  });
  const nodeSpecs = nodes.map((node, j) => {
    const where = `${at}.object_types[${j}]`;
    for (const k of Object.keys(node)) if (!['id', 'condition', 'sort', 'limit'].includes(k)) throw new BadRequest(`${where}: unknown field "${k}"`);
    const ot = n.objectTypes.get(node.id);
    if (!ot) throw new NotFound('OntologyQuery.ObjectType.NotFound', `object type ${node.id} not found in knowledge network ${n.kn.id}`);
    validateCondition(node.condition, `${where}.condition`);
    let nl = node.limit ?? 0;
    if (!(typeof nl === 'number' && Number.isInteger(nl))) throw new BadRequest(`${where}.limit must be an integer`);
    if (nl === 0) nl = 1000;
    if (nl < 1 || nl > 10000) throw new BadRequest(`${where}.limit ${nl} out of range [1, 10000]`);
    const sort = node.sort ?? [];
    if (!Array.isArray(sort) || !sort.every((s) => isPlainObject(s) && typeof s.field === 'string' && (s.direction === 'asc' || s.direction === 'desc'))) {
      throw new BadRequest(`${where}.sort must be [{field, direction: asc|desc}]`);
    }
    const order = sort.map((s) => ({ field: s.field, direction: s.direction }));
    for (const pk of ot.def.primary_keys) if (!order.some((o) => o.field === pk)) order.push({ field: pk, direction: 'asc' });
    return { ot, condition: node.condition ?? null, limit: nl, order };
  });
  return { steps, nodeSpecs, limit };
}

class NotFound extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function subgraph(ctx, n) {
  const started = Date.now();
  const badHeaders = checkSearchHeaders(ctx);
  if (badHeaders) return badHeaders;
  const queryType = ctx.query.get('query_type') ?? '';
  if (queryType !== 'relation_path' && queryType !== '') {
    return platformError(400, INVALID, `query_type "${queryType}" is not supported (relation_path, or empty for exploration)`, ctx.lang);
  }
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, ctx.lang);
  const body = parsed.value;
  if (queryType === '') return explore(ctx, n, body);
  const account = String(ctx.headers['x-account-id']);
  const entries = [];
  try {
    if (!isPlainObject(body)) throw new BadRequest('request body must be a JSON object');
    for (const k of Object.keys(body)) if (k !== 'relation_type_paths') throw new BadRequest(`unknown field "${k}"`);
    const paths = body.relation_type_paths;
    if (!Array.isArray(paths) || paths.length === 0) throw new BadRequest('relation_type_paths must be a non-empty array');
    const specs = paths.map((p, i) => validatePath(n, p, i));
    for (const { steps, nodeSpecs, limit } of specs) {
      // Candidates per node: the caller's visible rows, filtered, sorted, limited.
      const candidates = [];
      for (const spec of nodeSpecs) {
        const access = applyAccess(spec.ot.def, spec.ot.rows, account);
        if (access.refused) return forbidden(ctx, n.kn.id, spec.ot.def.id);
        const rows = access.rows.filter((r) => evaluate(spec.condition, r).ok);
        rows.sort((a, b) => compareBy(spec.order, a, b));
        candidates.push(rows.slice(0, spec.limit));
      }
      const objects = {};
      const relationPaths = [];
      const objectOf = (spec, row) => {
        const meta = instanceMeta(spec.ot.def, n.kn.id, row);
        if (!objects[meta._instance_id]) {
          objects[meta._instance_id] = {
            ...meta,
            object_type_id: spec.ot.def.id,
            object_type_name: spec.ot.def.name,
            properties: { ...row, ...meta },
          };
        }
        return meta._instance_id;
      };
      const linked = (step, cur, next) =>
        step.rt.mapping_rules.every((m) => {
          const [src, tgt] = step.forward ? [cur, next] : [next, cur];
          return compare(src[m.source_property.name], tgt[m.target_property.name]) === 0;
        });
      const walk = (j, chain) => {
        if (relationPaths.length >= limit) return;
        if (j === steps.length) {
          const ids = chain.map((row, k) => objectOf(nodeSpecs[k], row));
          relationPaths.push({
            relations: steps.map((step, k) => ({
              relation_type_id: step.rt.id,
              relation_type_name: step.rt.name,
              source_object_id: step.forward ? ids[k] : ids[k + 1],
              target_object_id: step.forward ? ids[k + 1] : ids[k],
            })),
            length: steps.length,
          });
          return;
        }
        for (const next of candidates[j + 1]) if (linked(steps[j], chain[j], next)) walk(j + 1, [...chain, next]);
      };
      for (const start of candidates[0]) walk(0, [start]);
      entries.push({ objects, relation_paths: relationPaths, current_path_number: relationPaths.length, overall_ms: Date.now() - started });
    }
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, ctx.lang);
    if (e instanceof NotFound) return platformError(404, e.code, e.message, ctx.lang);
    throw e;
  }
  return json(200, { entries });
}

// ---------- routing ----------

/** [method, pattern, handler(ctx, n, ...captures)]; "*" captures one path segment. */
const ROUTES = [
  ['POST', ['object-types', '*'], (ctx, n, ot) => search(ctx, n.kn.id, ot)],
  ['GET', ['object-types', '*', 'schema'], schemaProbe],
  ['POST', ['object-types', '*', 'properties'], logicProperties],
  ['POST', ['subgraph'], subgraph],
  ['POST', ['metrics', '*', 'data'], metricData],
  ['POST', ['action-types', '*'], actionInfo],
  ['POST', ['action-types', '*', 'execute'], executeAction],
  ['GET', ['action-executions', '*'], getExecutionLegacy],
  ['GET', ['action-logs'], listExecutions],
  ['GET', ['action-logs', '*'], getExecutionPaged],
];

export { validateCondition, evaluate, compare, applyAccess, instanceMeta, checkSearchHeaders, compareBy };

export default {
  name: 'ontology_query',
  prefix: '/api/ontology-query/',
  reset(state) {
    resetActions(state);
  },
  handle(ctx) {
    if (!ctx.path.startsWith(BASE)) return null;
    const parts = ctx.path.slice(BASE.length).split('/');
    if (!parts[0] || parts.slice(1).some((s) => s === '')) return null;
    const rest = parts.slice(1);
    const matches = ROUTES.filter(([, pat]) => pat.length === rest.length && pat.every((s, i) => s === '*' || s === rest[i]));
    if (matches.length === 0) return null;
    if (!ctx.headers['x-account-id']) {
      return platformError(401, 'OntologyQuery.Unauthorized', 'missing x-account-id header', ctx.lang);
    }
    const route = matches.find(([m]) => m === ctx.method);
    if (!route) return platformError(405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`, ctx.lang);
    // Header checks come before the 404s, as documented in the README.
    if (route[0] === 'POST' && route[1][2] !== 'execute' && route[1][2] !== 'data') {
      const bad = checkSearchHeaders(ctx);
      if (bad) return bad;
    }
    const knId = decodeURIComponent(parts[0]);
    const n = ctx.dataset.network(knId);
    if (!n) return platformError(404, 'OntologyQuery.KnowledgeNetwork.NotFound', `knowledge network ${knId} not found`, ctx.lang);
    const captures = route[1].map((s, i) => (s === '*' ? decodeURIComponent(rest[i]) : null)).filter((s) => s !== null);
    return route[2](ctx, n, ...captures);
  },
};
