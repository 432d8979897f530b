// vega-backend (data resources), internal face /api/vega-backend/in/v1/...
// (see ../README.md). Data: data/vega/resources.json, plus one
// resource per object-type binding of the knowledge networks (data_source
// {type:"resource", id}), whose rows are that object type's instances.
//
// POST /in/v1/resources/query runs a tiny SQL evaluator, enough for run_sql:
//   SELECT <*|cols|COUNT(*)> FROM {{res_x}} [WHERE c op v [AND …]] [ORDER BY c [ASC|DESC]] [LIMIT n [OFFSET m]]
// Anything else is a 400 in the vega envelope, with the read-only policy's wording
// for CTEs, set operations and nested SELECTs.

import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { parse, isNumeric, compareNumeric } from '../lib/json.mjs';
import { json, platformError, parseBody, isPlainObject, intParam } from '../lib/http.mjs';
import { can, strip } from '../lib/grants.mjs';

const BASE = '/api/vega-backend/in/v1';
const DOC = parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'data', 'vega', 'resources.json'), 'utf8'));
const CATEGORIES = ['table', 'file', 'fileset', 'api', 'metric', 'topic', 'index', 'logicview', 'dataset'];
const SQL_CONNECTORS = ['mysql', 'mariadb', 'postgresql', 'sqlserver'];
const CURSOR_TTL_S = 300;

// Catalogs and resources, built once per dataset (the KN bindings come from it).
const cache = new WeakMap();
export function inventory(dataset) {
  let inv = cache.get(dataset);
  if (inv) return inv;
  const catalogs = new Map([DOC.kn_catalog, ...DOC.catalogs].map((c) => [c.id, c]));
  const resources = new Map(DOC.resources.map((r) => [r.id, r]));
  for (const n of dataset.networks.values()) {
    for (const { def, rows } of n.objectTypes.values()) {
      const ds = def.data_source;
      if (!ds || ds.type !== 'resource' || !ds.id || resources.has(ds.id)) continue;
      // A restricted object type's resource is readable by the accounts it names.
      const access = def.access ? Object.fromEntries([
        ...Object.entries(def.access).map(([a, g]) => [a, g && g.query_data === false ? ['view_detail'] : ['view_detail', 'query_data']]),
        ['*', []],
      ]) : undefined;
      const props = def.data_properties || [];
      resources.set(ds.id, {
        id: ds.id, catalog_id: DOC.kn_catalog.id, name: ds.name || ds.id, category: 'table', status: 'active',
        description: `${def.name} (${n.kn.id}/${def.id})`,
        schema_definition: props.map((p) => ({
          name: (p.mapped_field && p.mapped_field.name) || p.name,
          type: (p.mapped_field && p.mapped_field.type) || p.type,
          display_name: p.display_name || p.name,
          description: p.comment || '',
        })),
        access,
        rows,
      });
    }
  }
  inv = { catalogs, resources };
  cache.set(dataset, inv);
  return inv;
}

const publicResource = (r) => strip(r, ['access', 'rows']);
const err = (ctx, status, code, details) => platformError(status, code, details, ctx.lang);
const badQuery = (ctx, details) => err(ctx, 400, 'VegaBackend.Query.InvalidParameter', details);

// ---------------------------------------------------------------- resources and catalogs

function listResources(ctx, inv, acct) {
  const q = ctx.query;
  let limit = intParam(q, 'limit', 20);
  const offset = intParam(q, 'offset', 0);
  const category = q.get('category') || '';
  const catalog = q.get('catalog_id') || '';
  const bad = (m) => err(ctx, 400, 'VegaBackend.Resource.InvalidParameter', m);
  if (Number.isNaN(limit) || limit < 0 || limit > 1000) return bad('limit must be 0..1000');
  if (Number.isNaN(offset) || offset < 0) return bad('offset must be a non-negative integer');
  if (category && !CATEGORIES.includes(category)) return bad(`category must be one of ${CATEGORIES.join(', ')}`);
  if (limit === 0) limit = 20;
  const all = [...inv.resources.values()].filter((r) => can(r.access, acct, 'view_detail')
    && (!category || r.category === category) && (!catalog || r.catalog_id === catalog));
  return json(200, { entries: all.slice(offset, offset + limit).map(publicResource), total_count: all.length });
}

function getResources(ctx, inv, acct, idsText) {
  const entries = [];
  for (const id of idsText.split(',').filter(Boolean)) {
    const r = inv.resources.get(id);
    if (!r) return err(ctx, 404, 'VegaBackend.Resource.NotFound', `resource ${id} not found`);
    if (!can(r.access, acct, 'view_detail')) return err(ctx, 403, 'VegaBackend.Resource.Forbidden', `view_detail was not granted for resource:${id}`);
    entries.push(publicResource(r));
  }
  return json(200, { entries });
}

function getCatalog(ctx, inv, id) {
  const c = inv.catalogs.get(id);
  if (!c) return err(ctx, 404, 'VegaBackend.Catalog.NotFound', `catalog ${id} not found`);
  return json(200, { entries: [c] });
}

// ---------------------------------------------------------------- SQL

// Replace string literals and quoted identifiers by placeholders so keyword checks
// only see SQL text. Returns {text, strings} or {error}.
function tokenizeLiterals(sql) {
  const strings = [];
  let out = '';
  for (let i = 0; i < sql.length;) {
    const ch = sql[i];
    if (ch === "'" || ch === '"' || ch === '`') {
      let j = i + 1;
      let val = '';
      for (;;) {
        if (j >= sql.length) return { error: `unterminated ${ch === '`' ? 'identifier' : 'string'}` };
        if (sql[j] === '\\' && ch !== '`' && j + 1 < sql.length) {
          val += sql[j + 1];
          j += 2;
        } else if (sql[j] === ch && sql[j + 1] === ch) {
          val += ch;
          j += 2;
        } else if (sql[j] === ch) break;
        else val += sql[j++];
      }
      strings.push(val);
      out += ch === '`' ? ` \u0001I${strings.length - 1} ` : ` \u0001S${strings.length - 1} `;
      i = j + 1;
    } else {
      out += ch;
      i += 1;
    }
  }
  return { text: out, strings };
}

const IDENT = String.raw`(?:\u0001I\d+|[A-Za-z_][A-Za-z0-9_]*)`;

function parseSelect(sql) {
  const t = tokenizeLiterals(sql);
  if (t.error) return { error: t.error };
  let text = t.text.replace(/\s+/g, ' ').trim().replace(/[;\s]+$/, '');
  if (text.includes(';')) return { error: 'multiple statements are not allowed' };
  if (/^\(*\s*WITH\b/i.test(text) || /\b(UNION|INTERSECT|EXCEPT)\b/i.test(text) || (text.match(/\bSELECT\b/gi) || []).length > 1) {
    return { policy: true, error: 'raw query rejected by read-only policy' };
  }
  if (!/^SELECT\b/i.test(text)) return { policy: true, error: 'raw query rejected by read-only policy' };
  const ident = (s) => {
    const m = /^\u0001I(\d+)$/.exec(s);
    return m ? t.strings[Number(m[1])] : s;
  };
  const re = new RegExp(String.raw`^SELECT (.+?) FROM \{\{\.?([a-z0-9][a-z0-9_-]{0,39})\}\}(?: (?:AS )?(${IDENT}))?`
    + String.raw`(?: WHERE (.+?))?(?: ORDER BY (${IDENT})(?: (ASC|DESC))?)?(?: LIMIT (\d+)(?: OFFSET (\d+))?)?$`, 'i');
  const m = re.exec(text);
  if (!m) {
    if (/\bJOIN\b/i.test(text)) return { error: 'the simulator supports one resource per query (no JOIN)' };
    if (!/\{\{/.test(text)) return { error: 'the query must reference a resource through a {{resource_id}} placeholder' };
    return { error: 'unsupported SQL: SELECT cols FROM {{res}} [WHERE c op v [AND ...]] [ORDER BY c] [LIMIT n [OFFSET m]]' };
  }
  const cols = [];
  for (const raw of m[1].split(',').map((s) => s.trim())) {
    let c;
    if (raw === '*') c = { star: true };
    else if ((c = /^COUNT\(\s*\*\s*\)(?: (?:AS )?(\S+))?$/i.exec(raw))) c = { count: true, as: c[1] ? ident(c[1]) : 'COUNT(*)' };
    else if ((c = new RegExp(String.raw`^(?:${IDENT}\.)?(${IDENT})(?: (?:AS )?(${IDENT}))?$`, 'i').exec(raw))) c = { name: ident(c[1]), as: ident(c[2] || c[1]) };
    else return { error: `unsupported select item: ${raw.replace(/\u0001[IS]\d+/g, '?')}` };
    cols.push(c);
  }
  const where = [];
  if (m[4]) {
    for (const part of m[4].split(/ AND /i)) {
      const w = new RegExp(String.raw`^(?:${IDENT}\.)?(${IDENT})\s*(=|!=|<>|>=|<=|>|<|LIKE)\s*(\u0001S\d+|-?\d+(?:\.\d+)?|NULL)$`, 'i').exec(part.trim());
      if (!w) return { error: `unsupported WHERE condition: ${part.trim().replace(/\u0001[IS]\d+/g, '?')}` };
      const vs = /^\u0001S(\d+)$/.exec(w[3]);
      const value = vs ? t.strings[Number(vs[1])] : /^null$/i.test(w[3]) ? null : parse(w[3]);
      where.push({ col: ident(w[1]), op: w[2].trim().toUpperCase(), value });
    }
  }
  return {
    resource: m[2], cols, where,
    order: m[5] ? { col: ident(m[5]), desc: /desc/i.test(m[6] || '') } : null,
    limit: m[7] !== undefined ? Number(m[7]) : null,
    offset: m[8] !== undefined ? Number(m[8]) : 0,
  };
}

function compare(a, b) {
  if (isNumeric(a) && (isNumeric(b) || (typeof b === 'string' && /^-?\d+(\.\d+)?$/.test(b)))) {
    return compareNumeric(a, typeof b === 'string' ? parse(b) : b);
  }
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function matches(row, w) {
  const v = row[w.col];
  if (w.value === null) return w.op === '=' ? v === null || v === undefined : v !== null && v !== undefined;
  if (v === null || v === undefined) return false;
  if (w.op === 'LIKE') {
    const re = new RegExp('^' + String(w.value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/%/g, '.*').replace(/_/g, '.') + '$', 's');
    return re.test(String(v));
  }
  const c = compare(v, w.value);
  return { '=': c === 0, '!=': c !== 0, '<>': c !== 0, '>': c > 0, '>=': c >= 0, '<': c < 0, '<=': c <= 0 }[w.op];
}

function evaluate(ctx, inv, acct, sql) {
  const q = parseSelect(sql);
  if (q.error) return { error: badQuery(ctx, q.error) };
  const r = inv.resources.get(q.resource);
  if (!r) return { error: err(ctx, 404, 'VegaBackend.Resource.NotFound', `resource ${q.resource} not found`) };
  if (!can(r.access, acct, 'query_data')) return { error: err(ctx, 403, 'VegaBackend.Resource.Forbidden', `query_data was not granted for resource:${r.id}`) };
  const cat = inv.catalogs.get(r.catalog_id);
  if (!cat || !SQL_CONNECTORS.includes(cat.connector_type)) {
    return { error: badQuery(ctx, `connector ${cat ? cat.connector_type : 'unknown'} of resource ${r.id} does not support raw SQL`) };
  }
  const schema = new Map(r.schema_definition.map((c) => [c.name, c.type]));
  const known = (c) => schema.has(c);
  for (const c of [...q.cols.filter((x) => x.name).map((x) => x.name), ...q.where.map((w) => w.col), ...(q.order ? [q.order.col] : [])]) {
    if (!known(c)) return { error: badQuery(ctx, `unknown column ${c} in resource ${r.id}`) };
  }
  let rows = r.rows.filter((row) => q.where.every((w) => matches(row, w)));
  if (q.cols.some((c) => c.count)) {
    if (q.cols.length !== 1) return { error: badQuery(ctx, 'COUNT(*) cannot be combined with other columns (no GROUP BY)') };
    return { columns: [{ name: q.cols[0].as, type: 'bigint' }], rows: [{ [q.cols[0].as]: rows.length }] };
  }
  if (q.order) {
    const { col, desc } = q.order;
    rows = rows.slice().sort((a, b) => (desc ? -1 : 1) * compare(a[col] ?? '', b[col] ?? ''));
  }
  rows = rows.slice(q.offset, q.limit === null ? undefined : q.offset + q.limit);
  const out = [];
  for (const c of q.cols) {
    if (c.star) for (const s of r.schema_definition) out.push({ name: s.name, as: s.name, type: s.type });
    else out.push({ name: c.name, as: c.as, type: schema.get(c.name) });
  }
  return {
    columns: out.map((c) => ({ name: c.as, type: c.type })),
    rows: rows.map((row) => Object.fromEntries(out.map((c) => [c.as, row[c.name] === undefined ? null : row[c.name]]))),
  };
}

function runQuery(ctx, inv, acct) {
  const p = parseBody(ctx.bodyText, null);
  if (p.error || !isPlainObject(p.value)) return badQuery(ctx, p.error ? `invalid JSON body: ${p.error}` : 'the body must be a JSON object');
  const b = p.value;
  const paging = b.paging === undefined ? {} : b.paging;
  if (!isPlainObject(paging)) return badQuery(ctx, 'paging must be an object');
  const state = ctx.state.vega;
  const now = Math.floor(Date.now() / 1000);

  let result;
  let start = 0;
  let limit;
  let mode;
  if (paging.cursor !== undefined) {
    // A continuation carries only the cursor.
    const c = typeof paging.cursor === 'string' ? state.cursors.get(paging.cursor) : undefined;
    if (!c || c.account !== acct) return badQuery(ctx, 'unknown or expired cursor');
    if (c.expires <= now) {
      state.cursors.delete(paging.cursor);
      return badQuery(ctx, 'unknown or expired cursor');
    }
    state.cursors.delete(paging.cursor);
    ({ result, start, limit } = c);
    mode = 'cursor';
  } else {
    if (typeof b.query !== 'string' || b.query.trim() === '') return badQuery(ctx, 'query is required');
    if (b.query_format !== undefined && b.query_format !== 'sql') return badQuery(ctx, 'query_format must be sql');
    if (b.input_dialect !== undefined && b.input_dialect !== 'mysql') return badQuery(ctx, 'input_dialect must be mysql');
    if (b.query_timeout_sec !== undefined && !(Number.isInteger(b.query_timeout_sec) && b.query_timeout_sec >= 0)) {
      return badQuery(ctx, 'query_timeout_sec must be a non-negative integer');
    }
    mode = paging.mode === undefined ? 'single' : paging.mode;
    if (mode !== 'single' && mode !== 'cursor') return badQuery(ctx, 'paging.mode must be single or cursor');
    limit = paging.limit === undefined ? 0 : paging.limit;
    if (!Number.isInteger(limit) || limit < 0 || limit > 10000) return badQuery(ctx, 'paging.limit must be an integer from 0 to 10000');
    if (limit === 0) limit = 20;
    result = evaluate(ctx, inv, acct, b.query);
    if (result.error) return result.error;
  }
  const page = result.rows.slice(start, start + limit);
  let next = null;
  let expires = null;
  if (mode === 'cursor' && start + limit < result.rows.length) {
    next = `cur_${randomBytes(8).toString('hex')}`;
    expires = now + CURSOR_TTL_S;
    state.cursors.set(next, { account: acct, result, start: start + limit, limit, expires });
  }
  return json(200, {
    columns: result.columns, entries: page, total_count: result.rows.length,
    paging: { next_cursor: next, expires_at_sec: expires },
  });
}

export default {
  name: 'vega',
  prefix: '/api/vega-backend/',
  reset(state) {
    state.vega = { cursors: new Map() };
  },
  handle(ctx) {
    if (!ctx.path.startsWith(BASE + '/')) return null;
    const segs = ctx.path.slice(BASE.length).split('/').filter((s) => s !== '').map(decodeURIComponent);
    const isRoute = (segs[0] === 'resources' && segs.length <= 2) || (segs[0] === 'catalogs' && segs.length === 2);
    if (!isRoute) return null;
    const acct = String(ctx.headers['x-account-id'] || '');
    // Vega refuses an empty account.
    if (!acct) return err(ctx, 401, 'VegaBackend.Unauthorized', 'missing x-account-id header');
    const inv = inventory(ctx.dataset);
    const want = (method, fn) => (ctx.method === method ? fn() : err(ctx, 405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`));
    if (segs[0] === 'catalogs') return want('GET', () => getCatalog(ctx, inv, segs[1]));
    if (segs.length === 1) return want('GET', () => listResources(ctx, inv, acct));
    if (segs[1] === 'query') return want('POST', () => runQuery(ctx, inv, acct));
    return want('GET', () => getResources(ctx, inv, acct, segs[1]));
  },
};
