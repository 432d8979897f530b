// bkn-backend (ontology manager), internal face /api/bkn-backend/in/v1/...
// (downstream.md §1.10-§1.12, §6.4). It trusts x-account-id like the real service.

import { json, platformError, intParam } from '../lib/http.mjs';
import { publicObjectType } from '../lib/dataset.mjs';

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
    kn.action_types = n.actionTypes;
  }
  return json(200, kn);
}

function objectTypes(ctx, n, idsText) {
  const ids = idsText.split(',').filter((s) => s !== '');
  const entries = [];
  for (const id of ids) {
    const o = n.objectTypes.get(id);
    // One unknown id fails the whole batch (downstream.md §6.4).
    if (!o) return platformError(404, 'BknBackend.ObjectType.NotFound', `object type ${id} not found in knowledge network ${n.kn.id}`, ctx.lang);
    entries.push(publicObjectType(o.def));
  }
  return json(200, { entries });
}

export default {
  name: 'bkn_backend',
  prefix: '/api/bkn-backend/',
  handle(ctx) {
    if (ctx.path !== BASE && !ctx.path.startsWith(BASE + '/')) return null;
    if (!ctx.headers['x-account-id']) {
      return platformError(401, 'BknBackend.Unauthorized', 'missing x-account-id header', ctx.lang);
    }
    if (ctx.method !== 'GET') return platformError(405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`, ctx.lang);
    const rest = ctx.path.slice(BASE.length).split('/').filter((s) => s !== '').map(decodeURIComponent);
    if (rest.length === 0) return listNetworks(ctx);
    const n = ctx.dataset.network(rest[0]);
    if (!n) return platformError(404, 'BknBackend.KnowledgeNetwork.NotFound', `knowledge network ${rest[0]} not found`, ctx.lang);
    if (rest.length === 1) return knDetail(ctx, n);
    if (rest.length === 3 && rest[1] === 'object-types') return objectTypes(ctx, n, rest[2]);
    return null;
  },
};
