// TOON end to end (docs/toon.md): a business tool's TOON text, over MCP (the default and
// response_format "toon") and over REST (?response_format=toon, application/toon),
// decodes with the reference decoder (@toon-format/toon 2.3.1, installed in
// build/ext) to exactly the JSON result of the same call; an invalid
// response_format is a 400 (REST) or a tool error (MCP) naming the allowed values.
//
// Results are compared losslessly: the JSON side is read by a parser that keeps each
// number's text. The reference decoder turns every numeric token into a JS number
// (docs/toon.md), so a number a double cannot hold (9007199254740993,
// 12345678901234567890123) must decode to Number(text) and appear with the same
// digits in the TOON text itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const TOON_JS = path.join(ROOT, 'build/ext/node_modules/@toon-format/toon/dist/index.mjs');
const NO_EXT = fs.existsSync(TOON_JS) ? false : `the reference TOON decoder is not installed (${TOON_JS}; run the test command's setup)`;

// A tool whose file declares only json cannot render TOON (every business tool must
// render it); such a case is reported as todo rather than hidden.
function toonTodo(tool) {
  const src = fs.readFileSync(path.join(ROOT, 'tools', `${tool}.lua`), 'utf8');
  const declared = /^\s*formats\s*=\s*\{([^}]*)\}/m.exec(src);
  if (!declared) return false; // no declaration means {"json", "toon"} (docs/writing-tools.md)
  const formats = declared[1];
  return formats.includes('"toon"') ? false : `tools/${tool}.lua declares formats {${formats.trim()}} without "toon"`;
}

// mcpTrims: the MCP result is a trimmed form of the REST one (each surface is checked
// against its own JSON). view: the tool's TOON text is the token-saving view its description states
// (src/codec/toonview.c, declared with toon_view); it must decode and turn back into exactly the result.
const SUBGRAPH = [{
  object_types: [{ id: 'ot_drug' }, { id: 'ot_manufacturer' }],
  relation_types: [{ relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' }],
}];
const CASES = [
  { tool: 'list_knowledge_networks', args: {} },
  { tool: 'get_kn_detail', args: { kn_id: 'kn_medical' }, view: true },
  {
    tool: 'query_object_instance',
    // the ot_drug row with drug_id 2^53+1, batch_no beyond int64, tags [] and ext {}
    argsJson: '{"kn_id":"kn_medical","ot_id":"ot_drug","condition":{"field":"drug_id","operation":"==","value":9007199254740993}}',
    bigs: ['9007199254740993', '12345678901234567890123'],
    view: true,
  },
  // all 22 rows: the view is a table, well under the JSON's size (in bytes, as a proxy for
  // tokens: tests/bench/tokens.sh measures those)
  { tool: 'query_object_instance', args: { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 30 }, bigs: ['9007199254740993', '12345678901234567890123'], view: true, maxBytes: 0.6 },
  { tool: 'search_schema', args: { kn_id: 'kn_medical', query: 'drug manufacturer' }, mcpTrims: true },
  { tool: 'get_object_types', args: { kn_id: 'kn_medical', ids: ['ot_drug'] }, view: true, mcpTrims: true },
  { tool: 'get_relation_types', args: { kn_id: 'kn_medical', ids: ['rt_produced_by'] }, view: true },
  { tool: 'query_instance_subgraph', args: { kn_id: 'kn_medical', relation_type_paths: SUBGRAPH }, view: true },
  { tool: 'get_logic_properties_values', args: { kn_id: 'kn_medical', ot_id: 'ot_company', query: 'approved drug count', _instance_identities: [{ company_id: 'company_000001' }], properties: ['approved_drug_count'] } },
  { tool: 'get_action_info', args: { kn_id: 'kn_medical', at_id: 'at_generate_treatment_plan' }, view: true },
  { tool: 'list_action_executions', args: { kn_id: 'kn_ops', limit: 10 }, view: true },
  // the factory's capabilities only: kind tool lists the gateway tools the caller's
  // surface does not show, which differ between MCP and REST
  { tool: 'search_capabilities', args: { kn_id: 'kn_medical', types: ['function', 'mcp_tool', 'skill'], limit: 10 }, view: true },
  { tool: 'list_skills', args: {} },
  { tool: 'get_skill_content', args: { skill_id: 'skill_contract_review' } },
  { tool: 'read_skill_file', args: { skill_id: 'skill_contract_review', rel_path: 'refs/checklist.md' } },
];
// The sentence a view tool's description carries (lua/contract.lua, toon_view).
const VIEW_SENTENCE = 'other nested fields follow the table as <array>_<field>, one entry per row; MCP sends whichever of this and compact JSON costs fewer tokens.';

// The token estimate of src/codec/tokproxy.c, written again (docs/benchmarks.md): MCP
// sends a TOON text only when its estimate is at most 93 % of the compact JSON's.
function tokens(s) {
  const b = Buffer.from(s, 'utf8');
  const word = (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
  const digit = (c) => c >= 48 && c <= 57;
  let n = 0;
  for (let i = 0; i < b.length;) {
    const c = b[i];
    let j = i + 1;
    if (word(c)) { while (j < b.length && word(b[j])) j++; n += 1 + Math.floor((j - i - 1) / 6); }
    else if (digit(c)) { while (j < b.length && digit(b[j])) j++; n += Math.floor((j - i + 2) / 3); }
    else if (c === 32) { while (j < b.length && b[j] === 32) j++; if (!(j - i === 1 && j < b.length && (word(b[j]) || digit(b[j])))) n++; }
    else if (c === 10 || c === 13 || c === 9) { while (j < b.length && (b[j] === 10 || b[j] === 13 || b[j] === 9)) j++; n++; }
    else if (c < 128) { while (j < b.length && b[j] < 128 && b[j] > 32 && !word(b[j]) && !digit(b[j])) j++; n += 1 + Math.floor((j - i - 1) / 3); }
    else { j = i + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1); n++; }
    i = j;
  }
  return n;
}
const cheaper = (text, json) => tokens(text) * 100 <= tokens(json) * 93;

let stack;
let sid;
let decode;

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token', ...headers },
    body,
    signal: AbortSignal.timeout(10000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

// ---- lossless JSON: numbers stay { num: text }, objects are { obj: [[k, v], ...] }
function parseLossless(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const str = () => {
    const m = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i));
    if (!m) throw new Error(`string expected at ${i}`);
    i += m[0].length;
    return JSON.parse(m[0]);
  };
  const expect = (ch) => { ws(); if (text[i] !== ch) throw new Error(`'${ch}' expected at ${i}`); i++; };
  function val() {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = [];
      ws();
      if (text[i] === '}') { i++; return { obj }; }
      for (;;) {
        ws();
        const k = str();
        expect(':');
        obj.push([k, val()]);
        ws();
        if (text[i] === '}') { i++; return { obj }; }
        expect(',');
      }
    }
    if (c === '[') {
      i++;
      const arr = [];
      ws();
      if (text[i] === ']') { i++; return { arr }; }
      for (;;) {
        arr.push(val());
        ws();
        if (text[i] === ']') { i++; return { arr }; }
        expect(',');
      }
    }
    if (c === '"') return str();
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(lit, i)) { i += lit.length; return v; }
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) throw new Error(`value expected at ${i}`);
    i += m[0].length;
    return { num: m[0] };
  }
  const v = val();
  ws();
  if (i !== text.length) throw new Error(`trailing text at ${i}`);
  return v;
}

const member = (v, key) => v.obj.find(([k]) => k === key)?.[1];

// The mathematical value of a number text as sign, significant digits and point.
function normNum(t) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t);
  let digits = m[2] + (m[3] ?? '');
  let point = m[2].length + Number(m[4] ?? 0);
  const lead = digits.match(/^0*/)[0].length;
  digits = digits.slice(lead).replace(/0+$/, '');
  point -= lead;
  return digits ? `${m[1]}${digits}@${point}` : '0';
}
const fitsDouble = (t) => normNum(String(Number(t))) === normNum(t);

// Numeric tokens of a TOON text outside quoted strings, normalised, with their counts.
function toonNumbers(toon) {
  const bare = toon.replace(/"(?:[^"\\]|\\.)*"/g, ' ');
  const counts = new Map();
  for (const m of bare.matchAll(/(?<![\w.-])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])/gi)) {
    const n = normNum(m[0]);
    counts.set(n, (counts.get(n) ?? 0) + 1);
  }
  return counts;
}

// Compares the decoded TOON value with the lossless JSON value; collects the numbers
// a double cannot hold. Rows of a table take the key order of their first row.
function compare(want, got, where, bigs, rowKeys) {
  if (want === null || typeof want !== 'object') {
    assert.strictEqual(got, want, where);
    return;
  }
  if ('num' in want) {
    assert.equal(typeof got, 'number', `${where}: ${JSON.stringify(got)} is not a number`);
    assert.equal(got, Number(want.num) || 0, `${where}: ${got} != ${want.num}`);
    if (!fitsDouble(want.num)) bigs.push([where, want.num]);
    return;
  }
  if ('arr' in want) {
    assert.ok(Array.isArray(got), `${where}: array expected, got ${JSON.stringify(got)}`);
    assert.equal(got.length, want.arr.length, `${where}: length`);
    const first = want.arr[0]?.obj?.map(([k]) => k);
    want.arr.forEach((v, i) => compare(v, got[i], `${where}[${i}]`, bigs, first));
    return;
  }
  assert.ok(got !== null && typeof got === 'object' && !Array.isArray(got), `${where}: object expected, got ${JSON.stringify(got)}`);
  const keys = want.obj.map(([k]) => k);
  const gotKeys = Object.keys(got);
  if (!(rowKeys && JSON.stringify(gotKeys) === JSON.stringify(rowKeys))) assert.deepEqual(gotKeys, keys, `${where}: keys`);
  for (const [k, v] of want.obj) compare(v, got[k], `${where}.${k}`, bigs);
}

const isRecord = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// The documented view turned back into the result: dotted columns were expanded by the
// decoder (expandPaths "safe"); a table `k` takes back each side list `k_<field>` (one
// entry per row, in row order); keys then follow the JSON result's order (want, the
// lossless value). ctx.args: the call's arguments, for the _instance_id that
// query_object_instance leaves out (<kn_id>-<ot_id>-<the single identity value>).
function unview(v, want, ctx) {
  if (Array.isArray(v)) return v.map((x, i) => unview(x, want?.arr?.[i] ?? want?.arr?.[0], ctx));
  if (!isRecord(v)) return v;
  const out = {};
  const used = new Set();
  const keys = Object.keys(v);
  for (const k of keys) {
    if (used.has(k)) continue;
    const x = v[k];
    const wantK = want?.obj ? member(want, k) : undefined;
    if (Array.isArray(x) && x.length && x.every(isRecord)) {
      const sides = keys.filter((s) => s.startsWith(`${k}_`) && !(want?.obj && member(want, s) !== undefined) && Array.isArray(v[s]) && v[s].length === x.length);
      out[k] = x.map((r, i) => {
        const row = { ...r };
        for (const s of sides) row[s.slice(k.length + 1)] = v[s][i];
        const wantRow = wantK?.arr?.[i];
        if (ctx.args && k === 'datas' && row._instance_id === undefined && isRecord(row._instance_identity)) {
          const [idKey, ...more] = Object.keys(row._instance_identity);
          if (idKey !== undefined && !more.length) {
            // the identity value as the TOON text writes it (compare checks it against the result)
            const idWant = wantRow && member(member(wantRow, '_instance_identity') ?? { obj: [] }, idKey);
            const id = idWant?.num ?? row._instance_identity[idKey];
            assert.equal(Number(id), Number(row._instance_identity[idKey]));
            row._instance_id = `${ctx.args.kn_id}-${ctx.args.ot_id}-${id}`;
          }
        }
        return unview(row, wantRow, ctx);
      });
      for (const s of sides) used.add(s);
      continue;
    }
    out[k] = unview(x, wantK, ctx);
  }
  if (!want?.obj) return out;
  // the result's key order
  const ordered = {};
  for (const [k] of want.obj) if (k in out) ordered[k] = out[k];
  for (const k of Object.keys(out)) if (!(k in ordered)) ordered[k] = out[k];
  return ordered;
}

// Asserts that TOON text decodes (strict) to the JSON text's value; returns the
// number of out-of-double numbers checked by their digits. view: the text is the
// documented view (decoded with expandPaths "safe", then turned back by unview).
function assertSameValue(toon, jsonText, what, view) {
  let decoded;
  try {
    decoded = decode(toon, view ? { strict: true, expandPaths: 'safe' } : { strict: true });
  } catch (e) {
    assert.fail(`${what}: the reference decoder rejects the TOON text (${e.message}):\n${toon}`);
  }
  const bigs = [];
  const want = parseLossless(jsonText);
  if (view) decoded = unview(decoded, want, { args: view.args, toon });
  compare(want, decoded, what, bigs);
  // every occurrence: as many tokens with those digits as the JSON has numbers
  const nums = toonNumbers(toon);
  const need = new Map();
  for (const [where, digits] of bigs) {
    const n = normNum(digits);
    need.set(n, (need.get(n) ?? 0) + 1);
    assert.ok((nums.get(n) ?? 0) >= need.get(n), `${where}: ${digits} is not in the TOON text:\n${toon}`);
  }
  return bigs.length;
}

// The raw text of the JSON value starting at text[start] ('{' or '['), by bracket
// matching outside strings.
function rawValueAt(text, start) {
  let depth = 0;
  let inStr = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inStr) {
      if (ch === '\\') i++;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') inStr = true;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  throw new Error(`unterminated value at ${start}`);
}

// tools/call over MCP: the result's text block and the raw structuredContent text.
async function mcpCall(tool, argsJson) {
  const r = await post(stack.server.mcpUrl, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"${tool}","arguments":${argsJson}}}`, { 'mcp-session-id': sid });
  assert.equal(r.status, 200, r.text);
  const res = JSON.parse(r.text).result; // numbers are read from the raw text below
  assert.ok(res, r.text);
  assert.equal(res.content.length, 1, r.text);
  assert.equal(res.content[0].type, 'text');
  const at = r.text.indexOf('"structuredContent":');
  return { isError: res.isError, text: res.content[0].text, structured: at < 0 ? undefined : rawValueAt(r.text, at + '"structuredContent":'.length), raw: r.text };
}

const withFormat = (argsJson, fmt) => (argsJson === '{}' ? `{"response_format":"${fmt}"}` : argsJson.replace(/^\{/, `{"response_format":"${fmt}",`));
const restUrl = (tool, query = '') => `${stack.server.base}${PREFIX}/kn/${tool}${query}`;

before(async () => {
  if (NO_EXT) return;
  ({ decode } = await import(pathToFileURL(TOON_JS).href));
  stack = await startStack({ capture: 'disabled' });
  const r = await post(stack.server.mcpUrl, '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toon","version":"1"}}}');
  assert.equal(r.status, 200, r.text);
  sid = r.headers.get('mcp-session-id');
  assert.ok(sid);
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

for (const c of CASES) {
  const argsJson = c.argsJson ?? JSON.stringify(c.args);
  const opts = { skip: NO_EXT, todo: NO_EXT ? false : toonTodo(c.tool) };
  test(`${c.tool}: MCP TOON (default and explicit) and REST ?response_format=toon decode to the JSON result`, opts, async () => {
    // MCP, response_format toon
    const t = await mcpCall(c.tool, withFormat(argsJson, 'toon'));
    assert.equal(t.isError, false, t.raw);
    assert.ok(t.structured, `no structuredContent: ${t.raw}`);
    const view = c.view ? { args: JSON.parse(argsJson) } : false;
    // the MCP text is the compact JSON result where the TOON text would not be the
    // cheaper in tokens (a view tool's description says so); REST toon stays TOON
    const jsonText = t.text === t.structured;
    const restToon = (await post(restUrl(c.tool, '?response_format=toon'), argsJson)).text;
    if (view) view.toon = restToon;
    if (jsonText) assert.ok(!cheaper(restToon, t.structured), `${c.tool}: the TOON text is the cheaper, yet MCP sent JSON`);
    else {
      assert.ok(!/^\s*[{[]/.test(t.text), `the text block is not TOON:\n${t.text}`);
      assert.ok(cheaper(t.text, t.structured), `${c.tool}: MCP sent TOON that is not the cheaper text`);
    }
    let bigs = jsonText ? 0 : assertSameValue(t.text, t.structured, `${c.tool} (MCP toon)`, view);

    if (c.maxBytes) assert.ok(Buffer.byteLength(t.text) <= c.maxBytes * Buffer.byteLength(t.structured), `${c.tool}: ${Buffer.byteLength(t.text)} bytes of TOON for ${Buffer.byteLength(t.structured)} of JSON`);

    // MCP without response_format: TOON is the default, the same text
    const d = await mcpCall(c.tool, argsJson);
    assert.equal(d.isError, false, d.raw);
    assert.equal(d.text, t.text);
    assert.equal(d.structured, t.structured);

    // MCP json: the text block is the structured result byte for byte
    const j = await mcpCall(c.tool, withFormat(argsJson, 'json'));
    assert.equal(j.isError, false, j.raw);
    assert.equal(j.text, j.structured);
    assert.equal(j.structured, t.structured);

    // REST: JSON by default; ?response_format=toon gives application/toon with the same text
    const rj = await post(restUrl(c.tool), argsJson);
    assert.equal(rj.status, 200, rj.text);
    assert.match(rj.headers.get('content-type') ?? '', /^application\/json/);
    if (!c.mcpTrims) assert.equal(rj.text, j.text);
    const rt = await post(restUrl(c.tool, '?response_format=toon'), argsJson);
    assert.equal(rt.status, 200, rt.text);
    assert.match(rt.headers.get('content-type') ?? '', /^application\/toon\b/);
    if (!c.mcpTrims) assert.equal(rt.text, jsonText ? restToon : t.text);
    bigs += assertSameValue(rt.text, rj.text, `${c.tool} (REST toon)`, view);

    for (const digits of c.bigs ?? []) {
      assert.ok(rj.text.includes(digits), `${digits} not in the JSON result: ${rj.text}`);
      assert.ok(toonNumbers(t.text).has(normNum(digits)), `${digits} not in the TOON text:\n${t.text}`);
    }
    if (c.bigs) assert.ok(bigs >= 2 * c.bigs.length, `only ${bigs} out-of-double numbers were compared`);
  });
}

test('a tool whose TOON text is the view says so in its description, in both languages', { skip: NO_EXT }, async () => {
  for (const lang of ['en-US', 'zh-CN']) {
    const r = await post(stack.server.mcpUrl, '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}', { 'mcp-session-id': sid, 'accept-language': lang });
    const tools = JSON.parse(r.text).result.tools;
    for (const c of CASES) {
      const t = tools.find((x) => x.name === c.tool);
      assert.ok(t, c.tool);
      const has = lang === 'en-US' ? t.description.includes(VIEW_SENTENCE) : t.description.includes('<数组>_<字段>');
      assert.equal(has, !!c.view, `${c.tool} (${lang}): ${t.description}`);
    }
  }
});

test('an invalid response_format: REST 400 and an MCP tool error, both naming json, toon', { skip: NO_EXT }, async () => {
  for (const bad of ['xml', 'TOON', '']) {
    const r = await post(restUrl('list_knowledge_networks', `?response_format=${encodeURIComponent(bad)}`), '{}', { 'accept-language': 'en-US' });
    if (bad === '') {
      // an empty value means the default, JSON
      assert.equal(r.status, 200, r.text);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(parseLossless(r.text).obj[0][0], 'entries');
      continue;
    }
    assert.equal(r.status, 400, `${bad}: ${r.text}`);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    const e = JSON.parse(r.text);
    assert.equal(e.code, 'Public.BadRequest', r.text);
    assert.match(e.details, /response_format/, r.text);
    assert.match(e.details, /json, toon/, r.text);
    assert.ok(e.details.includes(bad), r.text);
  }
  for (const bad of ['"xml"', '"TOON"', '1', 'null', '["toon"]']) {
    const m = await mcpCall('list_knowledge_networks', `{"response_format":${bad}}`);
    assert.equal(m.isError, true, `${bad}: ${m.raw}`);
    const e = JSON.parse(m.text);
    // the error object is the text block's JSON; an error carries no structuredContent
    assert.equal(m.structured, undefined, m.raw);
    assert.equal(e.retryable, false, m.text);
    assert.equal(e.required_action, 'fix_arguments', m.text);
    assert.equal(e.code, 'Public.BadRequest', m.text);
    assert.match(e.details, /response_format/, m.text);
    assert.match(e.details, /json, toon/, m.text);
  }
  // nothing reached bkn-backend for a refused format
  const since = (await (await fetch(`${stack.sim.base}/_sim/requests`, { signal: AbortSignal.timeout(5000) })).json()).last_seq;
  await post(restUrl('list_knowledge_networks', '?response_format=xml'), '{}');
  await mcpCall('list_knowledge_networks', '{"response_format":"xml"}');
  const recs = (await (await fetch(`${stack.sim.base}/_sim/requests?since=${since}&service=bkn_backend`, { signal: AbortSignal.timeout(5000) })).json()).requests;
  assert.deepEqual(recs, []);
});
