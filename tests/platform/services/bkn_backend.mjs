// bkn-backend (ontology manager), internal face /api/bkn-backend/in/v1/...
// (see ../README.md). It trusts x-account-id like the real
// service. Under knowledge-networks/{kn}:
//   GET  (detail, include_detail, mode=export)
//   GET  object-types|relation-types|action-types|metrics[/{id,id}]   lists / batches
//   POST object-types|relation-types|action-types|metrics             typed searches
//        (x-http-method-override: GET; knn/match relevance on "*", _score)
//   GET  capabilities?limit=-1&type=                                   mounted capabilities

import { json, platformError, intParam, parseBody, isPlainObject } from '../lib/http.mjs';
import { publicObjectType, publicActionType } from '../lib/dataset.mjs';
import { validateCondition, evaluate, compare } from './ontology_query.mjs';

const BASE = '/api/bkn-backend/in/v1/knowledge-networks';
const SORTS = ['name', 'update_time', 'create_time'];

function listNetworks(ctx) {
  const q = ctx.query;
  const bad = (msg) => platformError(400, 'BknBackend.KnowledgeNetwork.InvalidParameter', msg, ctx.lang);
  let limit = intParam(q, 'limit', 0);
  const offset = intParam(q, 'offset', 0);
  const sort = q.get('sort') || 'update_time';
  const direction = q.get('direction') || 'desc';
  if (Number.isNaN(limit) || limit < -1 || limit > 1000) return bad('limit must be -1 (all) or 0..1000');
  if (Number.isNaN(offset) || offset < 0) return bad('offset must be a non-negative integer');
  if (!SORTS.includes(sort)) return bad(`sort must be one of ${SORTS.join(', ')}`);
  if (direction !== 'asc' && direction !== 'desc') return bad('direction must be asc or desc');
  if (limit === 0) limit = 20;

  const pattern = (q.get('name_pattern') || '').toLowerCase();
  let items = ctx.dataset.listNetworks().filter((kn) => !pattern || kn.name.toLowerCase().includes(pattern));
  const sign = direction === 'asc' ? 1 : -1;
  items = items.slice().sort((a, b) => {
    const x = a[sort];
    const y = b[sort];
    const c = typeof x === 'string' ? x.localeCompare(y, 'en') : x - y;
    return sign * (c || a.id.localeCompare(b.id));
  });
  const total = items.length;
  const page = limit === -1 ? items.slice(offset) : items.slice(offset, offset + limit);
  return json(200, { entries: page, total_count: total });
}

function knDetail(ctx, n) {
  const q = ctx.query;
  const kn = { ...n.kn };
  if (q.get('include_detail') === 'true') {
    const exportView = q.get('mode') === 'export';
    kn.concept_groups = n.conceptGroups;
    kn.object_types = [...n.objectTypes.values()].map((o) => publicObjectType(o.def, { exportView }));
    kn.relation_types = n.relationTypes;
    kn.action_types = n.actionTypes.map(publicActionType);
  }
  return json(200, kn);
}

const INVALID = 'BknBackend.Concept.InvalidParameter';

/** The concepts of one kind, as the service returns them. */
function conceptsOf(n, kind, { detail = true } = {}) {
  switch (kind) {
    case 'object-types':
      return [...n.objectTypes.values()].map((o) => {
        const ot = publicObjectType(o.def);
        if (detail) return ot;
        // include_detail=false: the type without its property definitions.
        const brief = { ...ot };
        delete brief.data_properties;
        delete brief.logic_properties;
        return brief;
      });
    case 'relation-types':
      return n.relationTypes;
    case 'action-types':
      return n.actionTypes.map(publicActionType);
    case 'metrics':
      return n.metrics;
    default:
      return null;
  }
}

const NOT_FOUND = {
  'object-types': 'BknBackend.ObjectType.NotFound',
  'relation-types': 'BknBackend.RelationType.NotFound',
  'action-types': 'BknBackend.ActionType.NotFound',
  metrics: 'BknBackend.Metric.NotFound',
};

/** GET …/{kind}/{id1,id2}: one unknown id fails the whole batch. */
function conceptBatch(ctx, n, kind, idsText) {
  const all = conceptsOf(n, kind, { detail: ctx.query.get('include_detail') !== 'false' });
  const entries = [];
  for (const id of idsText.split(',').filter((x) => x !== '')) {
    const c = all.find((x) => x.id === id);
    if (!c) return platformError(404, NOT_FOUND[kind], `${kind.replace(/s$/, '').replace('-', ' ')} ${id} not found in knowledge network ${n.kn.id}`, ctx.lang);
    entries.push(c);
  }
  return json(200, { entries });
}

/** limit/offset of the list endpoints: absent or 0 -> def, -1 -> all. */
function paging(ctx, def) {
  let limit = intParam(ctx.query, 'limit', 0);
  const offset = intParam(ctx.query, 'offset', 0);
  if (Number.isNaN(limit) || limit < -1 || limit > 1000) return { error: 'limit must be -1 (all) or 0..1000' };
  if (Number.isNaN(offset) || offset < 0) return { error: 'offset must be a non-negative integer' };
  if (limit === 0) limit = def;
  return { limit, offset };
}

/** GET …/{kind}: list; metrics filter by scope_type and scope_ref (comma-separated). */
function conceptList(ctx, n, kind) {
  const pg = paging(ctx, 10);
  if (pg.error) return platformError(400, INVALID, pg.error, ctx.lang);
  let items = conceptsOf(n, kind);
  const scopeType = ctx.query.get('scope_type');
  const scopeRef = ctx.query.get('scope_ref');
  if (kind === 'metrics' && scopeType) items = items.filter((m) => m.scope_type === scopeType);
  if (kind === 'metrics' && scopeRef) {
    const refs = scopeRef.split(',');
    items = items.filter((m) => refs.includes(m.scope_ref));
  }
  const namePattern = (ctx.query.get('name_pattern') || '').toLowerCase();
  if (namePattern) items = items.filter((c) => String(c.name).toLowerCase().includes(namePattern));
  const page = pg.limit === -1 ? items.slice(pg.offset) : items.slice(pg.offset, pg.offset + pg.limit);
  return json(200, { entries: page, total_count: items.length });
}

// ---------- relevance for the typed searches ----------

/** Lower-case word tokens plus CJK bigrams (single characters for 1-char runs). */
function tokens(text) {
  const out = new Set();
  const s = String(text).toLowerCase();
  for (const w of s.match(/[a-z0-9_]{2,}/g) || []) out.add(w);
  for (const run of s.match(/[\u3400-\u9fff]+/g) || []) {
    if (run.length === 1) out.add(run);
    for (let i = 0; i + 1 < run.length; i++) out.add(run.slice(i, i + 2));
  }
  return out;
}

/** Every string a concept is findable by (names, comments, tags, property names). */
function textOf(c, field) {
  if (field !== '*') return [c[field]].flat().filter((v) => typeof v === 'string').join(' ');
  const parts = [];
  const visit = (v, key) => {
    if (typeof v === 'string' && !['module_type', 'type', 'value_from', 'scope_type'].includes(key)) parts.push(v);
    else if (Array.isArray(v)) v.forEach((x) => visit(x, key));
    else if (isPlainObject(v) && key !== 'mapped_field') for (const [k, x] of Object.entries(v)) if (k !== 'condition_operations') visit(x, k);
  };
  visit(c, '');
  return parts.join(' ');
}

/** The share of the query's tokens found in the concept, 0..1 (deterministic "knn"). */
function relevance(c, field, query) {
  const q = tokens(query);
  if (q.size === 0) return 0;
  const have = tokens(textOf(c, field));
  let hit = 0;
  for (const t of q) if (have.has(t)) hit += 1;
  return Math.round((hit / q.size) * 10000) / 10000;
}

/** {ok, score}: match/knn leaves score by relevance; other leaves as ontology-query. */
function evalConcept(cond, c) {
  if (cond === null || cond === undefined) return { ok: true, score: 0 };
  if (cond.operation === 'and' || cond.operation === 'or') {
    const subs = (cond.sub_conditions || []).filter((x) => x !== null && x !== undefined);
    if (subs.length === 0) return { ok: true, score: 0 };
    const rs = subs.map((x) => evalConcept(x, c));
    const ok = cond.operation === 'and' ? rs.every((r) => r.ok) : rs.some((r) => r.ok);
    return { ok, score: ok ? Math.max(...rs.map((r) => (r.ok ? r.score : 0))) : 0 };
  }
  if (cond.operation === 'match' || cond.operation === 'knn') {
    const score = relevance(c, cond.field, cond.value ?? '');
    return { ok: score > 0, score };
  }
  return { ok: evaluate(cond, c).ok, score: 0 };
}

const SEARCH_KEYS = ['concept_groups', 'condition', 'sort', 'limit', 'need_total', 'offset'];

/** POST …/{kind} with x-http-method-override: GET: search concepts of one kind. */
function conceptSearch(ctx, n, kind) {
  const { lang } = ctx;
  const ct = String(ctx.headers['content-type'] || '').toLowerCase();
  if (!/^application\/json\s*(;|$)/.test(ct)) return platformError(406, 'BknBackend.InvalidRequestHeader.ContentType', `Content-Type must be application/json, got "${ct}"`, lang);
  if (String(ctx.headers['x-http-method-override'] || '').toUpperCase() !== 'GET') {
    return platformError(405, 'Public.MethodNotAllowed', `POST ${kind} is a search: send x-http-method-override: GET`, lang);
  }
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, lang);
  const body = parsed.value;
  const bad = (msg) => platformError(400, INVALID, msg, lang);
  if (!isPlainObject(body)) return bad('request body must be a JSON object');
  for (const k of Object.keys(body)) if (!SEARCH_KEYS.includes(k)) return bad(`unknown field "${k}"`);
  try {
    validateCondition(body.condition);
  } catch (e) {
    return bad(e.message);
  }
  let limit = body.limit ?? 0;
  if (!(typeof limit === 'number' && Number.isInteger(limit) && limit >= -1 && limit <= 10000)) return bad('limit must be -1 (all) or 0..10000');
  if (limit === 0) limit = 10;
  const offset = body.offset ?? 0;
  if (!(typeof offset === 'number' && Number.isInteger(offset) && offset >= 0)) return bad('offset must be a non-negative integer');
  const sort = body.sort ?? [];
  if (!Array.isArray(sort) || !sort.every((x) => isPlainObject(x) && typeof x.field === 'string' && (x.direction === 'asc' || x.direction === 'desc'))) {
    return bad('sort must be [{field, direction: asc|desc}]');
  }
  let items = conceptsOf(n, kind);
  const groups = body.concept_groups ?? [];
  if (!Array.isArray(groups)) return bad('concept_groups must be an array');
  if (groups.length) {
    // The real service fails with a 5xx on an unknown group; the gateway passes it on.
    const unknown = groups.filter((g) => !n.conceptGroups.some((cg) => cg.id === g));
    if (unknown.length) return platformError(500, 'BknBackend.ConceptGroup.NotFound', `concept groups not found: ${unknown.join(', ')}`, lang);
    const ots = new Set(n.conceptGroups.filter((cg) => groups.includes(cg.id)).flatMap((cg) => cg.object_type_ids || []));
    const inGroup = {
      'object-types': (c) => ots.has(c.id),
      'relation-types': (c) => ots.has(c.source_object_type_id) || ots.has(c.target_object_type_id),
      'action-types': (c) => ots.has(c.object_type_id),
      metrics: (c) => ots.has(c.scope_ref),
    }[kind];
    items = items.filter(inGroup);
  }
  let hits = [];
  for (const c of items) {
    const r = evalConcept(body.condition, c);
    if (r.ok) hits.push({ ...c, _score: r.score });
  }
  const order = sort.length ? sort : [{ field: '_score', direction: 'desc' }];
  hits.sort((a, b) => {
    for (const { field, direction } of order) {
      const x = compare(a[field], b[field]) ?? 0;
      if (x) return direction === 'desc' ? -x : x;
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  const total = hits.length;
  hits = limit === -1 ? hits.slice(offset) : hits.slice(offset, offset + limit);
  const reply = { entries: hits };
  if (body.need_total === true) reply.total_count = total;
  return json(200, reply);
}

/** GET …/capabilities: what the network has mounted. */
function capabilities(ctx, n) {
  const pg = paging(ctx, 10); // the default page of 10 is why callers send limit=-1
  if (pg.error) return platformError(400, 'BknBackend.Capability.InvalidParameter', pg.error, ctx.lang);
  const type = ctx.query.get('type');
  if (type && !['skill', 'function', 'mcp_tool'].includes(type)) {
    return platformError(400, 'BknBackend.Capability.InvalidParameter', 'type must be skill, function or mcp_tool', ctx.lang);
  }
  const items = n.capabilities.filter((c) => !type || c.capability_type === type);
  const page = pg.limit === -1 ? items.slice(pg.offset) : items.slice(pg.offset, pg.offset + pg.limit);
  return json(200, { entries: page, total_count: items.length });
}

const KINDS = ['object-types', 'relation-types', 'action-types', 'metrics'];

export default {
  name: 'bkn_backend',
  prefix: '/api/bkn-backend/',
  handle(ctx) {
    if (ctx.path !== BASE && !ctx.path.startsWith(BASE + '/')) return null;
    if (!ctx.headers['x-account-id']) {
      return platformError(401, 'BknBackend.Unauthorized', 'missing x-account-id header', ctx.lang);
    }
    const rest = ctx.path.slice(BASE.length).split('/').filter((s) => s !== '').map(decodeURIComponent);
    const known =
      rest.length <= 1 ||
      (rest.length === 2 && (KINDS.includes(rest[1]) || rest[1] === 'capabilities')) ||
      (rest.length === 3 && KINDS.includes(rest[1]));
    if (!known) return null;
    // Only the typed searches (knowledge-networks/{kn}/{kind}) accept POST.
    const searchRoute = rest.length === 2 && KINDS.includes(rest[1]);
    if (ctx.method !== 'GET' && !(searchRoute && ctx.method === 'POST')) {
      return platformError(405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`, ctx.lang);
    }
    if (rest.length === 0) return listNetworks(ctx);
    const n = ctx.dataset.network(rest[0]);
    if (!n) return platformError(404, 'BknBackend.KnowledgeNetwork.NotFound', `knowledge network ${rest[0]} not found`, ctx.lang);
    if (rest.length === 1) return knDetail(ctx, n);
    if (rest[1] === 'capabilities') return capabilities(ctx, n);
    if (rest.length === 3) return conceptBatch(ctx, n, rest[1], rest[2]);
    return ctx.method === 'POST' ? conceptSearch(ctx, n, rest[1]) : conceptList(ctx, n, rest[1]);
  },
};
