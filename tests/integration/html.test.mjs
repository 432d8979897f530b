// The catalogue page for people (docs/info.md): the info routes answer a
// client that prefers text/html with a page built from the same data as the JSON.
// Checked as markup (every tool, grouped in display order, schemas, configs with a
// copy button, localized labels, escaping of hostile tool texts, no external assets,
// CSP), then rendered in headless Chromium through a local proxy that adds the
// bearer token: the DOM lists every tool and a screenshot is saved under the build
// folder (skipped when Debian's chromium is not installed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';
import { TOKEN, get } from './lib/mcp-session.mjs';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const BUILD_DIR = process.env.CL_BIN ? path.dirname(path.resolve(process.env.CL_BIN)) : path.join(ROOT, 'build');
const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
// A tool whose texts try to break out of the page: it must come out as text.
const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"> & \'q\' </td></table>';
const HOSTILE_TOOL = `local TXT = ${JSON.stringify(HOSTILE)}
return {
    name = "zz_markup", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "<b>标记</b> & \\"引号\\"", ["en-US"] = "<b>Markup</b> & \\"quotes\\"" },
    description = { ["zh-CN"] = TXT, ["en-US"] = TXT },
    group = "capability", order = 990, surfaces = { "mcp" }, formats = { "json" },
    input_schema = {
        type = "object", additionalProperties = false,
        properties = { ["q<i>"] = { type = "string", description = { ["zh-CN"] = TXT, ["en-US"] = TXT } } },
    },
    handle = function() return {} end,
}
`;

let stack;
let tmp;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-html-'));
  fs.cpSync(path.join(ROOT, 'tools'), path.join(tmp, 'tools'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'tools/zz_markup.lua'), HOSTILE_TOOL);
  stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: path.join(tmp, 'tools') } });
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const infoUrl = (surface) => `${stack.server.base}${PREFIX}${{ mcp: '/mcp', compact: '/mcp-compact', ptc: '/mcp/ptc' }[surface]}/info`;

async function page(surface, lang) {
  const r = await get(infoUrl(surface), { accept: HTML, ...(lang ? { 'accept-language': lang } : {}) });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
  return r;
}

test('the page lists every tool of the surface, grouped in display order, with schemas and configs', async () => {
  for (const surface of ['mcp', 'compact', 'ptc']) {
    const doc = (await get(infoUrl(surface))).json;
    const r = await page(surface);
    const html = r.text;
    assert.match(html, /^<!DOCTYPE html>/);
    assert.match(html, /<html lang="zh-CN">/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.equal(r.headers.get('content-language'), 'zh-CN');
    assert.match(r.headers.get('vary'), /Accept, Accept-Language/);
    // Every tool, once, in the order of the JSON (which is tools/list order), then the
    // REST and gateway tools (no tools/list shows them; not on the PTC surface).
    const gateway = doc.gateway_tools || [];
    assert.deepEqual(gateway.map((t) => t.name), surface === 'ptc' ? [] : ['search_instance', 'explore_subgraph', 'query_metric', 'find_skills'], surface);
    const ids = [...html.matchAll(/<article class="tool" id="tool-([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(ids, [...doc.tools, ...gateway].map((t) => t.name.replace(/&/g, '&amp;')), surface);
    // Groups: one section each, in the order of their first tool; the gateway tools last.
    const groups = [...html.matchAll(/<section class="group" id="group-([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(groups, [...new Set(doc.tools.map((t) => t.group)), ...(gateway.length ? ['gateway'] : [])], surface);
    if (gateway.length) assert.match(html.slice(html.indexOf('id="group-gateway"')), /execute_tool/);
    assert.equal(groups[0], 'lifecycle');
    // The endpoint and both configs, each with a copy button.
    assert.ok(html.includes(`<code id="endpoint">${doc.endpoint}</code>`));
    for (const id of ['endpoint', 'cfg-generic', 'cfg-claude']) assert.match(html, new RegExp(`<button type="button" data-copy="${id}"`));
    assert.ok(html.includes('mcp-remote'));
    assert.ok(!html.includes(TOKEN), 'the caller token is never on the page');
  }
  // Input schema rendered as a table: required first, with types and descriptions.
  const html = (await page('mcp')).text;
  const q = html.slice(html.indexOf('id="tool-query_object_instance"'));
  const table = q.slice(0, q.indexOf('</table>'));
  assert.match(table, /<tr class="d0"><td><code>kn_id<\/code><\/td><td class="ty">string<\/td><td class="rq">是<\/td><td>知识网络 ID/);
  assert.ok(table.indexOf('<code>kn_id</code>') < table.indexOf('<code>limit</code>'), 'required properties first');
  assert.match(table, /<code>bkn_context\.conversation_id<\/code>/, 'nested properties shown as parent.child');
  assert.match(table, /class="ty">array&lt;string&gt;</);
});

test('labels follow the language; English on request', async () => {
  const zh = (await page('compact')).text;
  const en = (await page('compact', 'en-US')).text;
  assert.match(zh, />复制</);
  assert.match(zh, /会话生命周期/);
  assert.match(en, /<html lang="en-US">/);
  assert.match(en, />Copy</);
  assert.match(en, /Session Lifecycle/);
  assert.doesNotMatch(en, /会话生命周期|复制/);
});

test('tool texts are escaped; no external assets; scripts and styles only under the CSP nonce', async () => {
  const r = await page('mcp');
  const html = r.text;
  assert.ok(!html.includes('<script>window.__pwned'), 'raw script from a tool file');
  assert.ok(!html.includes('<img'), 'raw markup from a tool file');
  assert.ok(!html.includes('<b>标记'), 'raw title markup');
  assert.ok(html.includes('&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt; &amp; &#39;q&#39; &lt;/td&gt;&lt;/table&gt;'));
  assert.ok(html.includes('&lt;b&gt;标记&lt;/b&gt; &amp; &quot;引号&quot;'));
  assert.ok(html.includes('<code>q&lt;i&gt;</code>'), 'property names are escaped too');
  // No external assets: no src/href to another origin, no @import or url() to fetch.
  assert.deepEqual([...html.matchAll(/\b(?:src|href)\s*=\s*"([^"]*)"/g)].map((m) => m[1]).filter((u) => !u.startsWith('#')), []);
  assert.doesNotMatch(html, /@import|url\(/);
  const csp = r.headers.get('content-security-policy');
  const nonce = /script-src 'nonce-([0-9a-f]{32})'/.exec(csp)?.[1];
  assert.ok(nonce, csp);
  assert.match(csp, /default-src 'none'/);
  const tags = [...html.matchAll(/<(script|style)\b([^>]*)>/g)];
  assert.equal(tags.length, 2);
  for (const t of tags) assert.equal(t[2].trim(), `nonce="${nonce}"`);
  assert.notEqual((await page('mcp')).headers.get('content-security-policy'), csp, 'a fresh nonce per response');
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
});

// ---- headless Chromium ----

// A local proxy that adds the bearer token, so that the browser can load the page.
// Headless Chromium ignores --lang for Accept-Language, so the proxy sets it from the
// "lang" query parameter of the page URL.
async function authProxy() {
  const target = new URL(stack.server.base);
  const server = http.createServer((req, res) => {
    const lang = new URL(req.url, 'http://x').searchParams.get('lang');
    const headers = { ...req.headers, host: target.host, authorization: `Bearer ${TOKEN}`, ...(lang ? { 'accept-language': lang } : {}) };
    const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers, timeout: 10000 }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => { res.writeHead(502); res.end(); });
    req.pipe(up);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// Runs chromium headless with args; resolves {code, stdout, stderr}; killed after ms.
function chromium(args, ms = 60000) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-chromium-'));
  const proc = spawn(CHROMIUM, [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', '--hide-scrollbars', `--user-data-dir=${profile}`, ...args,
  ], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (c) => { stdout += c; });
  proc.stderr.on('data', (c) => { stderr += c; });
  return new Promise((resolve) => {
    const t = setTimeout(() => { try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ } }, ms);
    proc.on('exit', (code, signal) => {
      clearTimeout(t);
      try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* the group is gone */ }
      fs.rmSync(profile, { recursive: true, force: true });
      resolve({ code, signal, stdout, stderr });
    });
  });
}

test('headless Chromium renders the page: every tool in the DOM, and a screenshot', { skip: CHROMIUM ? false : 'Debian chromium is not installed (scripts/lib.sh installs it)', timeout: 150000 }, async () => {
  const proxy = await authProxy();
  try {
    // info-page-420.png: a phone's width, where the config blocks scroll sideways
    // instead of wrapping inside their strings (tests/spec/page_spec.lua holds the rule)
    for (const [surface, lang, file, size] of [['mcp', 'zh-CN', 'info-page.png', '1280,2000'],
      ['compact', 'en-US', 'info-page-compact-en.png', '1280,2000'], ['mcp', 'en-US', 'info-page-420.png', '420,2400']]) {
      const doc = (await get(infoUrl(surface), { 'accept-language': lang })).json;
      const url = `${proxy.base}${new URL(infoUrl(surface)).pathname}?lang=${lang}`;
      const dom = await chromium([`--lang=${lang}`, '--dump-dom', url]);
      assert.equal(dom.code, 0, dom.stderr.slice(-2000));
      assert.match(dom.stdout, new RegExp(`<html lang="${lang}">`));
      for (const t of doc.tools) {
        const name = t.name.replace(/&/g, '&amp;');
        assert.ok(dom.stdout.includes(`id="tool-${name}"`), `${surface}: ${t.name} missing from the DOM`);
      }
      assert.ok(!/<img\b/.test(dom.stdout), 'no element was injected by tool texts');
      const shot = path.join(BUILD_DIR, file);
      fs.rmSync(shot, { force: true });
      const png = await chromium([`--lang=${lang}`, `--screenshot=${shot}`, `--window-size=${size}`, url]);
      assert.equal(png.code, 0, png.stderr.slice(-2000));
      const head = fs.readFileSync(shot).subarray(0, 8);
      assert.deepEqual([...head], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG file');
      assert.ok(fs.statSync(shot).size > 20000, 'the screenshot shows something');
    }
  } finally {
    await new Promise((r) => proxy.server.close(r));
  }
});
