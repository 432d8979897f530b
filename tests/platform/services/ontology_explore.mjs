// ontology-query, the two reads besides instance search and relation paths:
//   POST subgraph?query_type=            exploration from one object type when the
//                                        topology is unknown (override GET)
//   POST metrics/{metric_id}/data        a modelled metric's data (a real POST)

import { createHash } from 'node:crypto';
import { json, platformError, parseBody, isPlainObject } from '../lib/http.mjs';
import { applyAccess, evaluate, compare, compareBy, instanceMeta, validateCondition } from './ontology_query.mjs';

const INVALID = 'OntologyQuery.ObjectType.InvalidParameter';
const EXPLORE_KEYS = ['source_object_type_id', 'direction', 'path_length', 'concept_groups', 'condition',
  'include_incomplete_path', 'sort', 'limit', 'offset', 'search_after', 'need_total'];
const MAX_PATHS = 2000;

class BadRequest extends Error {}

const forbidden = (ctx, knId, otId) =>
  platformError(403, 'Public.Forbidden', `Public.Forbidden: query_data was not granted for object_type:${knId}/${otId}`, ctx.lang);

function exploreRequest(n, b) {
  if (!isPlainObject(b)) throw new BadRequest('request body must be a JSON object');
  for (const k of Object.keys(b)) if (!EXPLORE_KEYS.includes(k)) throw new BadRequest(`unknown field "${k}"`);
  if (typeof b.source_object_type_id !== 'string' || b.source_object_type_id === '') throw new BadRequest('source_object_type_id is required');
  if (!['forward', 'backward', 'bidirectional'].includes(b.direction)) throw new BadRequest('direction must be forward, backward or bidirectional');
  if (!(Number.isInteger(b.path_length) && b.path_length >= 1 && b.path_length <= 3)) throw new BadRequest('path_length must be an integer from 1 to 3');
  validateCondition(b.condition);
  let limit = b.limit ?? 0;
  if (!Number.isInteger(limit)) throw new BadRequest('limit must be an integer');
  const cursor = Array.isArray(b.search_after) && b.search_after.length ? b.search_after : null;
  if (limit === 0) limit = cursor ? 10000 : 10;
  if (limit < 1 || limit > 10000) throw new BadRequest(`limit ${limit} out of range [1, 10000]`);
  const offset = b.offset ?? 0;
  if (!(Number.isInteger(offset) && offset >= 0)) throw new BadRequest('offset must be a non-negative integer');
  const sort = b.sort ?? [];
  if (!Array.isArray(sort) || !sort.every((s) => isPlainObject(s) && typeof s.field === 'string' && (s.direction === 'asc' || s.direction === 'desc'))) {
    throw new BadRequest('sort must be [{field, direction: asc|desc}]');
  }
  let inGroups = null;
  if (Array.isArray(b.concept_groups) && b.concept_groups.length) {
    inGroups = new Set();
    for (const g of b.concept_groups) {
      const cg = n.conceptGroups.find((x) => x.id === g);
      if (!cg) throw new BadRequest(`concept group ${g} not found`);
      for (const id of cg.object_type_ids || []) inGroups.add(id);
    }
  }
  return { ...b, limit, offset: cursor ? 0 : offset, cursor, sort, inGroups };
}

/** POST subgraph with an empty query_type: paths of path_length edges from the
 *  source object type's instances (a page of them), along every relation type in
 *  the direction asked; instances without any path are isolated_objects. */
export function explore(ctx, n, body) {
  const started = Date.now();
  const account = String(ctx.headers['x-account-id']);
  let req;
  try {
    req = exploreRequest(n, body);
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, ctx.lang);
    throw e;
  }
  const src = n.objectTypes.get(req.source_object_type_id);
  if (!src) return platformError(404, 'OntologyQuery.ObjectType.NotFound', `object type ${req.source_object_type_id} not found in knowledge network ${n.kn.id}`, ctx.lang);
  if (req.inGroups && !req.inGroups.has(src.def.id)) return platformError(400, INVALID, `object type ${src.def.id} is not in the concept groups given`, ctx.lang);

  const visible = new Map(); // ot id -> rows the caller may read, or null (refused)
  const rowsOf = (id) => {
    if (!visible.has(id)) {
      const ot = n.objectTypes.get(id);
      const a = ot ? applyAccess(ot.def, ot.rows, account) : { refused: true };
      visible.set(id, a.refused ? null : a.rows);
    }
    return visible.get(id);
  };
  const sourceRows = rowsOf(src.def.id);
  if (sourceRows === null) return forbidden(ctx, n.kn.id, src.def.id);

  const order = req.sort.map((s) => ({ field: s.field, direction: s.direction }));
  for (const pk of src.def.primary_keys) if (!order.some((o) => o.field === pk)) order.push({ field: pk, direction: 'asc' });
  if (req.cursor && req.cursor.length !== order.length) {
    return platformError(400, INVALID, `search_after has ${req.cursor.length} values, expected ${order.length} (one per sort key)`, ctx.lang);
  }
  let hits = sourceRows.filter((r) => evaluate(req.condition ?? null, r).ok);
  hits.sort((a, b) => compareBy(order, a, b));
  const total = hits.length;
  if (req.cursor) {
    const cur = {};
    order.forEach((o, i) => (cur[o.field] = req.cursor[i]));
    hits = hits.filter((h) => compareBy(order, h, cur) > 0);
  }
  const page = hits.slice(req.offset, req.offset + req.limit);

  // The edges that leave an object type in the direction asked.
  const edgesFrom = (otId) => {
    const out = [];
    for (const rt of n.relationTypes) {
      if (req.inGroups && !(req.inGroups.has(rt.source_object_type_id) && req.inGroups.has(rt.target_object_type_id))) continue;
      if (req.direction !== 'backward' && rt.source_object_type_id === otId) out.push({ rt, forward: true, next: rt.target_object_type_id });
      if (req.direction !== 'forward' && rt.target_object_type_id === otId) out.push({ rt, forward: false, next: rt.source_object_type_id });
    }
    return out;
  };
  const linked = (edge, cur, next) => edge.rt.mapping_rules.every((m) => {
    const [s, t] = edge.forward ? [cur, next] : [next, cur];
    return compare(s[m.source_property.name], t[m.target_property.name]) === 0;
  });

  const objects = {};
  const objectOf = (otId, row) => {
    const def = n.objectTypes.get(otId).def;
    const meta = instanceMeta(def, n.kn.id, row);
    if (!objects[meta._instance_id]) {
      objects[meta._instance_id] = { ...meta, object_type_id: def.id, object_type_name: def.name, properties: { ...row, ...meta } };
    }
    return meta._instance_id;
  };
  const paths = [];
  const isolated = {};
  for (const start of page) {
    const before = paths.length;
    const walk = (otId, row, steps, seen) => {
      if (paths.length >= MAX_PATHS) return;
      if (steps.length === req.path_length) {
        paths.push(steps);
        return;
      }
      let extended = false;
      for (const edge of edgesFrom(otId)) {
        const nextRows = rowsOf(edge.next);
        if (nextRows === null) continue; // a type the caller may not read ends the path
        for (const next of nextRows) {
          const id = `${edge.next}\u0000${instanceMeta(n.objectTypes.get(edge.next).def, n.kn.id, next)._instance_id}`;
          if (seen.has(id) || !linked(edge, row, next)) continue;
          extended = true;
          walk(edge.next, next, [...steps, { edge, from: [otId, row], to: [edge.next, next] }], new Set([...seen, id]));
        }
      }
      if (!extended && steps.length > 0 && req.include_incomplete_path === true) paths.push(steps);
    };
    const startId = `${src.def.id}\u0000${instanceMeta(src.def, n.kn.id, start)._instance_id}`;
    walk(src.def.id, start, [], new Set([startId]));
    if (paths.length === before) {
      const meta = instanceMeta(src.def, n.kn.id, start);
      isolated[meta._instance_id] = { ...meta, object_type_id: src.def.id, object_type_name: src.def.name, properties: { ...start, ...meta } };
    }
  }
  const relationPaths = paths.map((steps) => ({
    relations: steps.map(({ edge, from, to }) => {
      const a = objectOf(from[0], from[1]);
      const b = objectOf(to[0], to[1]);
      return {
        relation_type_id: edge.rt.id,
        relation_type_name: edge.rt.name,
        source_object_id: edge.forward ? a : b,
        target_object_id: edge.forward ? b : a,
      };
    }),
    length: steps.length,
  }));
  const reply = { objects };
  if (Object.keys(isolated).length) reply.isolated_objects = isolated;
  reply.relation_paths = relationPaths;
  if (req.need_total === true && !req.cursor && total > 0) reply.total_count = total;
  if (page.length > 0) reply.search_after = order.map((o) => page[page.length - 1][o.field] ?? null);
  reply.overall_ms = Date.now() - started;
  return json(200, reply);
}

// ---------- metric data ----------

const METRIC_KEYS = ['time', 'condition', 'analysis_dimensions', 'order_by', 'having', 'limit'];
const STEP_S = { day: 86400, week: 7 * 86400, month: 30 * 86400, quarter: 91 * 86400, year: 365 * 86400 };
const HAVING_OPS = ['==', '!=', '>', '>=', '<', '<='];

function seed(...parts) {
  return createHash('sha256').update(parts.join('|')).digest().readUInt32BE(0);
}

const round4 = (x) => Math.round(x * 10000) / 10000;

function timeStr(sec, step) {
  const d = new Date(sec * 1000 + 8 * 3600000); // the platform's zone, UTC+8
  const y = d.getUTCFullYear();
  const m = String(d.getUTCMonth() + 1).padStart(2, '0');
  const day = String(d.getUTCDate()).padStart(2, '0');
  if (step === 'year') return `${y}`;
  if (step === 'quarter') return `${y}-Q${Math.floor(d.getUTCMonth() / 3) + 1}`;
  if (step === 'month') return `${y}-${m}`;
  return `${y}-${m}-${day}`;
}

/** The start of the next step: days and weeks by length, months, quarters and years
 *  by the calendar (UTC+8). */
function nextTime(sec, step) {
  if (step === 'day' || step === 'week') return sec + STEP_S[step];
  const d = new Date(sec * 1000 + 8 * 3600000);
  const months = step === 'month' ? 1 : step === 'quarter' ? 3 : 12;
  const next = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds());
  return Math.floor((next - 8 * 3600000) / 1000);
}

/** The values a dimension takes: the distinct values of that property in the
 *  network's instances (its first object type that has it), else one "其他". */
function dimensionValues(n, name) {
  for (const { rows } of n.objectTypes.values()) {
    const vals = [...new Set(rows.map((r) => r[name]).filter((v) => typeof v === 'string'))];
    if (vals.length) return vals.sort();
  }
  return ['其他'];
}

function metricRequest(metric, b) {
  if (!isPlainObject(b)) throw new BadRequest('request body must be a JSON object');
  for (const k of Object.keys(b)) if (!METRIC_KEYS.includes(k)) throw new BadRequest(`unknown field "${k}"`);
  const t = b.time ?? {};
  if (!isPlainObject(t)) throw new BadRequest('time must be an object');
  for (const k of Object.keys(t)) if (!['start', 'end', 'instant', 'step'].includes(k)) throw new BadRequest(`time: unknown field "${k}"`);
  const instant = t.instant === true;
  for (const k of ['start', 'end']) {
    if (t[k] !== undefined && !Number.isInteger(t[k])) throw new BadRequest(`time.${k} must be an integer (unix seconds)`);
  }
  if (!instant && (t.start === undefined || t.end === undefined)) throw new BadRequest('time.start and time.end are required unless time.instant is true');
  if (t.start !== undefined && t.end !== undefined && t.end < t.start) throw new BadRequest('time.end is before time.start');
  const step = t.step ?? (instant ? null : 'month');
  if (step !== null && !STEP_S[step]) throw new BadRequest(`time.step must be one of ${Object.keys(STEP_S).join(', ')}`);
  const known = (metric.analysis_dimensions || []).map((d) => d.name);
  const dims = b.analysis_dimensions ?? [];
  if (!Array.isArray(dims) || !dims.every((d) => typeof d === 'string')) throw new BadRequest('analysis_dimensions must be an array of strings');
  for (const d of dims) if (!known.includes(d)) throw new BadRequest(`analysis dimension ${d} is not defined for metric ${metric.id} (defined: ${known.join(', ') || 'none'})`);
  validateCondition(b.condition);
  const orderBy = b.order_by ?? [];
  if (!Array.isArray(orderBy) || !orderBy.every((o) => isPlainObject(o) && typeof o.property === 'string' && (o.direction === undefined || o.direction === 'asc' || o.direction === 'desc'))) {
    throw new BadRequest('order_by must be [{property, direction: asc|desc}]');
  }
  const having = b.having ?? null;
  if (having !== null && !(isPlainObject(having) && typeof having.field === 'string' && HAVING_OPS.includes(having.operation) && typeof having.value === 'number')) {
    throw new BadRequest(`having must be {field, operation: ${HAVING_OPS.join(' ')}, value: number}`);
  }
  const limit = b.limit ?? 0;
  if (!(Number.isInteger(limit) && limit >= 0)) throw new BadRequest('limit must be a non-negative integer');
  return { instant, start: t.start, end: t.end, step, dims, condition: b.condition ?? null, orderBy, having, limit };
}

/** POST metrics/{metric_id}/data?fill_null=: one series per combination of the
 *  analysis dimensions' values; deterministic values (a hash of metric, labels, time),
 *  every seventh point missing unless fill_null makes it 0. */
export function metricData(ctx, n, metricId) {
  const started = Date.now();
  const ct = String(ctx.headers['content-type'] || '').toLowerCase();
  if (!/^application\/json\s*(;|$)/.test(ct)) {
    return platformError(406, 'OntologyQuery.InvalidRequestHeader.ContentType', `Content-Type must be application/json, got "${ct}"`, ctx.lang);
  }
  const metric = n.metrics.find((m) => m.id === metricId);
  if (!metric) return platformError(404, 'OntologyQuery.Metric.NotFound', `metric ${metricId} not found in knowledge network ${n.kn.id}`, ctx.lang);
  const scope = metric.scope_type === 'object_type' ? n.objectTypes.get(metric.scope_ref) : null;
  if (scope && applyAccess(scope.def, scope.rows, String(ctx.headers['x-account-id'])).refused) {
    return forbidden(ctx, n.kn.id, scope.def.id);
  }
  const parsed = parseBody(ctx.bodyText, {});
  if (parsed.error) return platformError(400, INVALID, `invalid JSON body: ${parsed.error}`, ctx.lang);
  let req;
  try {
    req = metricRequest(metric, parsed.value);
  } catch (e) {
    if (e instanceof BadRequest) return platformError(400, INVALID, e.message, ctx.lang);
    throw e;
  }
  const fillNull = ctx.query.get('fill_null') === 'true';
  let combos = [{}];
  for (const d of req.dims) combos = combos.flatMap((c) => dimensionValues(n, d).map((v) => ({ ...c, [d]: v })));
  combos = combos.filter((labels) => evaluate(req.condition, labels).ok);
  const times = [];
  if (req.instant) times.push(req.end ?? Math.floor(started / 1000));
  else for (let t = req.start, i = 0; t <= req.end && i < 120; t = nextTime(t, req.step), i++) times.push(t);
  const valueAt = (labels, t, i) => {
    if ((seed(metric.id, JSON.stringify(labels), 'gap') + i) % 7 === 0 && !req.instant) return fillNull ? 0 : null;
    return seed(metric.id, JSON.stringify(labels), t) % 1000;
  };
  let series = combos.map((labels) => ({ labels, values: times.map((t, i) => valueAt(labels, t, i)) }));
  const totalOf = (s) => s.values.reduce((a, v) => a + (v ?? 0), 0);
  if (req.having) {
    const h = req.having;
    series = series.filter((s) => {
      const x = h.field === 'value' ? totalOf(s) : Number(s.labels[h.field]);
      return { '==': x === h.value, '!=': x !== h.value, '>': x > h.value, '>=': x >= h.value, '<': x < h.value, '<=': x <= h.value }[h.operation];
    });
  }
  for (const o of [...req.orderBy].reverse()) {
    const dir = o.direction === 'desc' ? -1 : 1;
    series.sort((a, b) => {
      const x = o.property === 'value' ? totalOf(a) : a.labels[o.property];
      const y = o.property === 'value' ? totalOf(b) : b.labels[o.property];
      return dir * (compare(x, y) ?? 0);
    });
  }
  if (req.limit > 0) series = series.slice(0, req.limit);
  const sums = times.map((_, i) => series.reduce((a, s) => a + (s.values[i] ?? 0), 0));
  const datas = series.map((s) => {
    const d = { labels: s.labels, times: times.map((t) => t * 1000), time_strs: times.map((t) => timeStr(t, req.step ?? 'day')), values: s.values };
    if (!req.instant) {
      d.growth_values = s.values.map((v, i) => (i === 0 || v === null || s.values[i - 1] === null ? null : v - s.values[i - 1]));
      d.growth_rates = s.values.map((v, i) => (i === 0 || v === null || !s.values[i - 1] ? null : round4((v - s.values[i - 1]) / s.values[i - 1])));
    }
    d.proportions = s.values.map((v, i) => (v === null || sums[i] === 0 ? null : round4(v / sums[i])));
    return d;
  });
  return json(200, { datas, overall_ms: Date.now() - started });
}
