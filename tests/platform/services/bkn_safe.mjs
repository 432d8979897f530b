// bkn-safe: AppKey introspection and the permission plumbing (resource-filter,
// batch checks).
//
// Grants come from the simulator's data: an object type's `access` key in
// data/kn_*.json (the accounts it names get view_detail, and query_data unless their
// grant says query_data: false; nobody else),
// the `access` keys of data/factory/*.json (tool boxes, MCP servers, skills) and of
// data/vega/resources.json. A record without `access` grants everything to everyone.
// Managing a knowledge network (create/modify/delete/authorize/task_manage) is
// granted only to u_admin.

import { json, parseBody, isPlainObject, platformError } from '../lib/http.mjs';
import { can } from '../lib/grants.mjs';
import { factoryData } from './operator_integration.mjs';
import { inventory as vegaInventory } from './vega.mjs';

const KEYS = {
  bak_demo_appkey: { sub: 'u_demo', subject_name: 'Demo User', account_type: 'user', key_id: 'key_demo_0001', key_name: 'demo key' },
  bak_demo_app_appkey: { sub: 'demo-app', subject_name: 'Demo App', account_type: 'app', key_id: 'key_demo_0002', key_name: 'demo app key' },
};

const KN_READ_OPS = ['view_detail', 'query_data', 'execute'];
const KN_ADMIN = 'u_admin';

/** Whether `acct` holds `op` on resource (type, id); false for unknown resources. */
function granted(dataset, acct, type, id, op) {
  switch (type) {
    case 'knowledge_network':
      if (!dataset.network(id)) return false;
      return KN_READ_OPS.includes(op) || acct === KN_ADMIN;
    case 'object_type': {
      const slash = id.indexOf('/');
      const o = slash > 0 ? dataset.objectType(id.slice(0, slash), id.slice(slash + 1)) : null;
      if (!o) return false;
      if (!['view_detail', 'query_data'].includes(op)) return false;
      if (!o.def.access) return true;
      // Same reading as ontology-query: a listed account may view; it may query
      // unless its grant says query_data: false.
      const g = Object.prototype.hasOwnProperty.call(o.def.access, acct) ? o.def.access[acct] : null;
      return !!g && (op === 'view_detail' || g.query_data !== false);
    }
    case 'tool_box':
    case 'operator': {
      const b = factoryData.BOXES.get(id);
      return !!b && can(b.access, acct, op);
    }
    case 'mcp': {
      const m = factoryData.MCPS.get(id);
      return !!m && can(m.access, acct, op);
    }
    case 'skill': {
      const s = factoryData.SKILLS.get(id);
      return !!s && can(s.access, acct, op);
    }
    case 'resource': {
      const r = vegaInventory(dataset).resources.get(id);
      return !!r && can(r.access, acct, op);
    }
    case 'catalog':
      return vegaInventory(dataset).catalogs.has(id);
    default:
      return false;
  }
}

const isRes = (r) => isPlainObject(r) && typeof r.type === 'string' && typeof r.id === 'string' && r.type !== '' && r.id !== '';
const isOps = (a) => Array.isArray(a) && a.every((x) => typeof x === 'string' && x !== '');

function accessorOf(ctx, body) {
  return typeof body.accessor_id === 'string' && body.accessor_id !== '' ? body.accessor_id : String(ctx.headers['x-account-id'] || '');
}

function resourceFilter(ctx) {
  const bad = (m) => platformError(400, 'BknSafe.Authz.InvalidParameter', m, ctx.lang);
  const p = parseBody(ctx.bodyText, null);
  if (p.error || !isPlainObject(p.value)) return bad('the body must be a JSON object');
  const b = p.value;
  const acct = accessorOf(ctx, b);
  if (!acct) return bad('accessor_id is required');
  if (!Array.isArray(b.resources) || !b.resources.every(isRes)) return bad('resources must be [{type, id}]');
  const vis = b.visibility_operations === undefined ? ['view_detail'] : b.visibility_operations;
  const cand = b.candidate_operations === undefined ? [] : b.candidate_operations;
  if (!isOps(vis) || !isOps(cand)) return bad('visibility_operations and candidate_operations must be arrays of operation names');
  const seen = new Set();
  const out = [];
  for (const r of b.resources) {
    const key = `${r.type}\u0000${r.id}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (!vis.every((op) => granted(ctx.dataset, acct, r.type, r.id, op))) continue;
    out.push({ resource_type: r.type, resource_id: r.id, operations: cand.filter((op) => granted(ctx.dataset, acct, r.type, r.id, op)) });
  }
  return json(200, { resources: out });
}

function checks(ctx) {
  const bad = (m) => platformError(400, 'BknSafe.Authz.InvalidParameter', m, ctx.lang);
  const p = parseBody(ctx.bodyText, null);
  if (p.error || !isPlainObject(p.value)) return bad('the body must be a JSON object');
  const b = p.value;
  const acct = accessorOf(ctx, b);
  if (!acct) return bad('accessor_id is required');
  if (!Array.isArray(b.checks) || b.checks.length === 0) return bad('checks must be a non-empty array');
  const results = [];
  for (const c of b.checks) {
    // Either {resource:{type,id}, operation} or {resource_type, resource_id, operation}.
    const r = isPlainObject(c) && isRes(c.resource) ? c.resource
      : isPlainObject(c) ? { type: c.resource_type, id: c.resource_id } : null;
    if (!r || !isRes(r) || typeof c.operation !== 'string' || c.operation === '') {
      return bad('each check is {resource:{type,id}, operation} or {resource_type, resource_id, operation}');
    }
    results.push({ resource_type: r.type, resource_id: r.id, operation: c.operation, allowed: granted(ctx.dataset, acct, r.type, r.id, c.operation) });
  }
  return json(200, { results });
}

export default {
  name: 'bkn_safe',
  prefix: '/api/safe/',
  handle(ctx) {
    const routes = {
      '/api/safe/v1/api-keys/introspect': null,
      '/api/safe/v1/authz/resource-filter': resourceFilter,
      '/api/safe/v1/authz/checks': checks,
    };
    if (!Object.prototype.hasOwnProperty.call(routes, ctx.path)) return null;
    if (ctx.method !== 'POST') return json(405, { error_code: 'Public.MethodNotAllowed', description: 'use POST' });
    if (routes[ctx.path]) return routes[ctx.path](ctx);
    const { value } = parseBody(ctx.bodyText, null);
    const token = isPlainObject(value) && typeof value.token === 'string' ? value.token : '';
    const k = Object.prototype.hasOwnProperty.call(KEYS, token) ? KEYS[token] : null;
    if (!k) return json(200, { active: false });
    return json(200, { active: true, ...k });
  },
};
