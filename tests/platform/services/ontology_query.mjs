// ontology-query, internal face: object instance search (downstream.md §1.3, §6.4).
// POST /api/ontology-query/in/v1/knowledge-networks/{kn}/object-types/{ot}
// with x-http-method-override: GET and Content-Type: application/json.

import { json, platformError, parseBody, isPlainObject } from '../lib/http.mjs';
import { isNumeric, compareNumeric, parse as parseJson } from '../lib/json.mjs';
import { publicObjectType } from '../lib/dataset.mjs';

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
  if (!grant) return { refused: true };
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

function search(ctx, knId, otId) {
  const started = Date.now();
  const { lang } = ctx;
  const ct = String(ctx.headers['content-type'] || '').toLowerCase();
  if (!/^application\/json\s*(;|$)/.test(ct)) {
    return platformError(406, 'OntologyQuery.InvalidRequestHeader.ContentType', `Content-Type must be application/json, got "${ct}"`, lang);
  }
  const override = String(ctx.headers['x-http-method-override'] || '').toUpperCase();
  if (override !== 'GET') {
    return platformError(400, 'OntologyQuery.InvalidRequestHeader.MethodOverride', 'x-http-method-override must be GET', lang);
  }
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
  if (access.refused) {
    return platformError(403, 'Public.Forbidden', `Public.Forbidden: query_data was not granted for object_type:${knId}/${otId}`, lang);
  }

  const relevance = usesRelevance(req.condition);
  let hits = [];
  for (const row of access.rows) {
    const r = evaluate(req.condition, row);
    if (r.ok) hits.push({ ...row, _score: relevance ? r.score : 0 });
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

export { validateCondition, evaluate, compare };

export default {
  name: 'ontology_query',
  prefix: '/api/ontology-query/',
  handle(ctx) {
    if (!ctx.path.startsWith(BASE)) return null;
    const parts = ctx.path.slice(BASE.length).split('/');
    if (!(parts.length === 3 && parts[1] === 'object-types' && parts[0] && parts[2])) return null;
    if (!ctx.headers['x-account-id']) {
      return platformError(401, 'OntologyQuery.Unauthorized', 'missing x-account-id header', ctx.lang);
    }
    if (ctx.method !== 'POST') return platformError(405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`, ctx.lang);
    return search(ctx, decodeURIComponent(parts[0]), decodeURIComponent(parts[2]));
  },
};
