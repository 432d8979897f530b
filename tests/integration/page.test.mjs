// The catalogue page and its shell are rendered by lua/page.lua (styles and scripts in
// lua/page_assets.lua) in the current generation (docs/info.md). Checked here against a
// copy of lua/: hostile schema texts (enum values, defaults, nested property names,
// $defs) come out escaped; a reload picks up a changed page; a page module that does
// not compile, raises, returns no string, runs past lua.max_run_ms or past its memory
// answers a clean 500 envelope (Public.InternalServerError.PageRenderFailed with an
// incident id whose log line carries the error and the traceback) while the JSON
// document, the tools and the service stay up.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';
import { TOKEN, post } from './lib/mcp-session.mjs';

const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
const H = '<script>alert("x")</script>&\'';
const H_ESC = '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;';
const HOSTILE_TOOL = `local H = ${JSON.stringify(H)}
return {
    name = "zz_schema_markup", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "标记", ["en-US"] = "Markup" },
    description = { ["zh-CN"] = H, ["en-US"] = H },
    group = "capability", order = 991, surfaces = { "mcp", "rest" }, formats = { "json" },
    input_schema = {
        type = "object", additionalProperties = false,
        properties = {
            mode = { type = "string", enum = { H, "plain" }, default = H },
            outer = { type = "object", properties = { [H] = { type = "string", description = H } } },
            ref = { ["$ref"] = "#/$defs/item" },
        },
        ["$defs"] = { item = { type = "object", description = H, properties = { [H] = { type = "integer" } } } },
    },
    handle = function() return { ok = true } end,
}
`;

let stack;
let tmp;
let luaDir;
const original = {};

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-page-'));
  luaDir = path.join(tmp, 'lua');
  fs.cpSync(path.join(ROOT, 'lua'), luaDir, { recursive: true });
  fs.cpSync(path.join(ROOT, 'tools'), path.join(tmp, 'tools'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'tools/zz_schema_markup.lua'), HOSTILE_TOOL);
  for (const f of ['page.lua', 'page_assets.lua']) original[f] = fs.readFileSync(path.join(luaDir, f), 'utf8');
  stack = await startStack({ capture: 'disabled', env: { CL_LUA_DIR: luaDir, CL_TOOLS_DIR: path.join(tmp, 'tools') } });
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const infoUrl = () => `${stack.server.base}${PREFIX}/mcp/info`;
const page = (headers = {}) => fetch(infoUrl(), { headers: { accept: HTML, authorization: `Bearer ${TOKEN}`, ...headers }, signal: AbortSignal.timeout(10000) });
const shell = () => fetch(infoUrl(), { headers: { accept: HTML }, signal: AbortSignal.timeout(10000) });

async function reload() {
  const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(10000) });
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  return body;
}

function writeLua(file, text) {
  fs.writeFileSync(path.join(luaDir, file), text);
}

// The service still answers: the JSON document and a tool call.
async function stillServing() {
  const r = await fetch(infoUrl(), { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  assert.ok((await r.json()).tools.length > 0);
  const call = await post(`${stack.server.base}${PREFIX}/kn/zz_schema_markup`, {});
  assert.equal(call.status, 200, call.text);
}

// A failed rendering: 500 with the error envelope and an incident id; the log line
// with that id names the error (and, when Lua raised, carries the traceback).
async function assertPageFailed(r, wantError, { traceback = true } = {}) {
  assert.equal(r.status, 500);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.headers.get('content-security-policy'), null, 'no page headers on the error');
  const env = await r.json();
  assert.equal(env.code, 'Public.InternalServerError.PageRenderFailed');
  assert.equal(env.retryable, false);
  assert.equal(env.required_action, 'contact_administrator');
  assert.match(env.incident_id, /^inc_[0-9a-f]{16}$/);
  assert.equal(env.details, `incident ${env.incident_id}`);
  let line;
  for (let i = 0; i < 50 && !line; i++) {
    line = stack.server.logs.join('').split('\n').filter((l) => l.includes(env.incident_id)).map((l) => JSON.parse(l))[0];
    if (!line) await new Promise((res) => setTimeout(res, 50));
  }
  assert.ok(line, 'the incident is logged');
  assert.equal(line.msg, 'page rendering failed');
  assert.match(line.error, wantError);
  if (traceback) assert.match(line.traceback, /^stack traceback:/);
}

test('hostile schema texts are escaped: enum values, defaults, nested names, $defs', async () => {
  const r = await page({ 'accept-language': 'en-US' });
  assert.equal(r.status, 200);
  const html = await r.text();
  const tool = html.slice(html.indexOf('id="tool-zz_schema_markup"'));
  const article = tool.slice(0, tool.indexOf('</article>'));
  assert.ok(!article.includes('<script'), 'raw markup from the tool file');
  assert.ok(article.includes(`<div class="desc">${H_ESC}</div>`));
  const json = '&quot;&lt;script&gt;alert(\\&quot;x\\&quot;)&lt;/script&gt;&amp;&#39;&quot;';
  assert.ok(article.includes(`one of: <code>${json}</code> <code>&quot;plain&quot;</code>`), 'enum values');
  assert.ok(article.includes(`default: <code>${json}</code>`), 'the default');
  assert.ok(article.includes(`<tr class="d1"><td><code>outer.${H_ESC}</code>`), 'a nested property name');
  assert.ok(article.includes(`<td class="ty">→ item</td>`));
  assert.ok(article.includes(`<h5><code>item</code> <span class="ty">object</span></h5><p>${H_ESC}</p>`), '$defs');
  assert.ok(article.includes(`<tr class="d1"><td><code>${H_ESC}</code></td><td class="ty">integer</td>`));
  assert.equal([...html.matchAll(/<script\b/g)].length, 1);
});

test('a reload picks up a changed page; the page and the shell render from the new generation', async () => {
  assert.doesNotMatch(await (await page()).text(), /reloaded-page/);
  writeLua('page_assets.lua', original['page_assets.lua'].replace(/\nreturn M\n$/,
    '\nM.catalogue_css = M.catalogue_css .. "/*reloaded-page*/"\nM.shell_css = M.shell_css .. "/*reloaded-shell*/"\nreturn M\n'));
  writeLua('page.lua', original['page.lua'].replace('<h1>Context Loader<span', '<h1>Context Loader (reloaded)<span'));
  try {
    await reload();
    const html = await (await page()).text();
    assert.match(html, /\/\*reloaded-page\*\/<\/style>/);
    assert.match(html, /<h1>Context Loader \(reloaded\)<span class="badge">\/mcp<\/span>/);
    assert.match(await (await shell()).text(), /\/\*reloaded-shell\*\/<\/style>/);
  } finally {
    writeLua('page_assets.lua', original['page_assets.lua']);
    writeLua('page.lua', original['page.lua']);
    await reload();
  }
  assert.doesNotMatch(await (await page()).text(), /reloaded/);
});

test('a broken page module answers a clean 500 envelope; JSON, tools and the service stay up', { timeout: 60000 }, async () => {
  const cases = [
    ['a raise while rendering',
      'local M = {}\nfunction M.catalogue(doc)\n    return doc.tools.nope.deeper\nend\nfunction M.shell()\n    error("shell template broken")\nend\nreturn M\n',
      /page\.lua:3: attempt to index a nil value/, /page\.lua:6: shell template broken/],
    ['no string', 'return { catalogue = function() return 42 end, shell = function() return {} end }\n',
      /page\.catalogue returned a number, not a string/, /page\.shell returned a table, not a string/],
    ['a missing function', 'return {}\n', /attempt to call a nil value/, /attempt to call a nil value/],
  ];
  try {
    // a page module that does not parse is refused by the reload, naming its file and
    // line; the running generation keeps rendering the page
    writeLua('page.lua', 'local M = {\nfunction M.catalogue(\n');
    const refused = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    const refusal = await refused.text();
    assert.equal(refused.status, 422, refusal);
    assert.match(refusal, /lua\/page\.lua:2: '\(' expected/);
    assert.equal((await page()).status, 200, 'the running generation still renders the page');
    await stillServing();
    for (const [what, text, pageError, shellError] of cases) {
      writeLua('page.lua', text);
      await reload();
      await assertPageFailed(await page(), pageError);
      await assertPageFailed(await shell(), shellError);
      await stillServing();
      console.log(`# ${what}: 500 PageRenderFailed, service up`);
    }
    // past the budgets: stopped by the run-time slice and by the memory cap
    writeLua('page.lua', 'return { catalogue = function() while true do end end,\n'
      + '  shell = function() return string.rep("x", 1 << 30) end }\n');
    await reload();
    // (the stop's reason is the check: a loop the budgets missed never answers)
    await assertPageFailed(await page(), /^page stopped: (run time limit|instruction budget) exceeded/, { traceback: false });
    await assertPageFailed(await shell(), /^page stopped: memory limit exceeded/, { traceback: false });
    await stillServing();
  } finally {
    writeLua('page.lua', original['page.lua']);
    await reload();
  }
  const r = await page();
  assert.equal(r.status, 200);
  assert.match(await r.text(), /<article class="tool" id="tool-zz_schema_markup">/);
  assert.equal((await shell()).status, 200);
});
