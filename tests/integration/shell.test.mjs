// The catalogue page a person can open in a browser: without a token, a GET that
// prefers text/html gets a public shell (a form, no data) whose script fetches the
// same URL with the typed token in the Authorization header and shows the catalogue
// in place. Checked as markup, then driven in headless Chromium over the DevTools
// protocol (--remote-debugging-pipe): type a wrong token (an error), then the right
// one (every tool in the page); the token never appears in the URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, PREFIX } from './lib/stack.mjs';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
let stack;

before(async () => { stack = await startStack({ capture: 'disabled' }); });
after(async () => { if (stack) assert.equal(await stack.stop(), 0); });

test('without a token a browser gets the shell: a form and no data; JSON still needs the token', async () => {
  const url = `${stack.server.base}${PREFIX}/mcp/info`;
  const r = await fetch(url, { headers: { accept: HTML, 'accept-language': 'en-US' } });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/html/);
  const csp = r.headers.get('content-security-policy');
  assert.match(csp, /connect-src 'self'/);
  assert.match(csp, /script-src 'nonce-[0-9a-f]{32}'/);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  const html = await r.text();
  assert.match(html, /<form id="f">/);
  assert.match(html, /type="password"/);
  assert.doesNotMatch(html, /query_object_instance|bkn_start_interaction/, 'the shell holds no catalogue data');
  // JSON without a token, and HTML with a bad token, are still refused
  assert.equal((await fetch(url)).status, 401);
  assert.equal((await fetch(url, { headers: { accept: HTML, authorization: 'Bearer nope' } })).status, 401);
  // zh-CN by default
  const zh = await (await fetch(url, { headers: { accept: HTML } })).text();
  assert.match(zh, /访问令牌/);
});

// A minimal DevTools-protocol client over chromium's pipe (fd 3 in, fd 4 out; NUL-framed JSON).
function devtools(args) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-shell-'));
  const proc = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
    `--user-data-dir=${profile}`, '--remote-debugging-pipe', ...args],
  { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'], detached: true });
  const toChrome = proc.stdio[3];
  const fromChrome = proc.stdio[4];
  let id = 0;
  const waiting = new Map();
  let pending = Buffer.alloc(0);
  fromChrome.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    let i;
    while ((i = pending.indexOf(0)) >= 0) {
      const msg = JSON.parse(pending.subarray(0, i).toString());
      pending = pending.subarray(i + 1);
      if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
    }
  });
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const n = ++id;
    waiting.set(n, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result)));
    toChrome.write(JSON.stringify({ id: n, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
  });
  const close = () => {
    try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ }
    fs.rmSync(profile, { recursive: true, force: true });
  };
  return { send, close };
}

test('headless Chromium: the shell takes a token and shows the catalogue', { skip: CHROMIUM ? false : 'Debian chromium is not installed (scripts/lib.sh installs it)', timeout: 120000 }, async () => {
  const url = `${stack.server.base}${PREFIX}/mcp/info`;
  const cdp = devtools([]);
  try {
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
    const evaluate = async (expression) => (await cdp.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId)).result.value;
    await cdp.send('Page.enable', {}, sessionId);
    // a narrow window (a phone, a side panel), where a long line would need a scrollbar
    await cdp.send('Emulation.setDeviceMetricsOverride', { width: 420, height: 900, deviceScaleFactor: 1, mobile: false }, sessionId);
    await cdp.send('Page.navigate', { url }, sessionId);
    const until = async (expression, what) => {
      for (let i = 0; i < 200; i++) {
        if (await evaluate(expression)) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`${what}: not seen in 20 s`);
    };
    // the whole document, not just the form: the script that wires the form comes last
    // (a submit before it ran would go nowhere under form-action 'none')
    await until("document.readyState==='complete' && !!document.getElementById('f')", 'the shell form');
    const type = (tok) => evaluate(`(function(){document.getElementById('t').value=${JSON.stringify(tok)};` +
      "document.getElementById('f').requestSubmit();return true;})()");
    await type('not-a-token');
    await until("document.getElementById('err') && document.getElementById('err').textContent.length>0", 'the refusal');
    assert.match(await evaluate("document.getElementById('err').textContent"), /令牌|token/i);
    await type('demo-user-token');
    await until("document.body.innerText.includes('query_object_instance')", 'the catalogue');
    const text = await evaluate('document.body.innerText');
    for (const name of ['bkn_start_interaction', 'list_knowledge_networks', 'search_capabilities']) assert.ok(text.includes(name), name);
    assert.equal(await evaluate('location.href'), url, 'the token never enters the URL');
    // the client-config boxes never split a JSON string across lines (a break inside
    // "Bearer <access-token>" or the URL reads as part of the value): they keep every line
    // whole and scroll sideways on a narrow window, each line of the text one rendered line
    const configs = await evaluate("(function(){return [...document.querySelectorAll('pre')]" +
      ".filter((p)=>p.textContent.includes('mcpServers')).map((p)=>{var r=document.createRange();" +
      "r.selectNodeContents(p);var tops=new Set([...r.getClientRects()].map((x)=>Math.round(x.top)));" +
      "return {ws:getComputedStyle(p).whiteSpace,lines:p.textContent.split('\\n').length,rendered:tops.size};});})()");
    assert.equal(configs.length, 2, JSON.stringify(configs));
    for (const c of configs) {
      assert.equal(c.ws, 'pre', JSON.stringify(c));
      assert.equal(c.rendered, c.lines, `a config line wrapped: ${JSON.stringify(c)}`);
    }
    // the endpoint URL stays visible without a scrollbar: in the facts above the configs
    assert.equal(await evaluate("(function(){var e=document.getElementById('endpoint');" +
      "return e.getBoundingClientRect().right<=document.documentElement.clientWidth+1;})()"), true);
    // the catalogue's own script runs under the shell's nonce (its copy buttons are wired)
    assert.equal(await evaluate("document.querySelectorAll('button').length > 0"), true);
  } finally {
    cdp.close();
  }
});
