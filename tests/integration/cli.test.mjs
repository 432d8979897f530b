// The command line an operator uses around the service: --print-config (effective
// values, where each came from, secrets masked), --check-config (like nginx -t),
// --check-tools without a directory (the configured tools_dir), relative paths read
// against the config file's directory, a warning for CL_* variables that name no key,
// and the one start-up line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT } from './lib/stack.mjs';

const BIN = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');

// A config directory with the shipped runtime and tools linked in under relative names.
function configDir(extra = '') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-cli-'));
  fs.symlinkSync(path.join(ROOT, 'tools'), path.join(dir, 'my-tools'));
  fs.symlinkSync(path.join(ROOT, 'lua'), path.join(dir, 'runtime'));
  fs.writeFileSync(path.join(dir, 'cl.conf'),
    `tools_dir = my-tools\nlua_dir = runtime\nsession_secret = s3cr3t-value\n${extra}`);
  return dir;
}

// The environment without the CL_* variables of whoever runs the tests.
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CL_') && k !== 'BKN_TRACE_CORE_URL') env[k] = v;
  return { ...env, ...extra };
}

function run(args, env = {}, cwd = os.tmpdir()) {
  return spawnSync(BIN, args, { encoding: 'utf8', env: cleanEnv(env), cwd, timeout: 30000 });
}

test('--print-config: effective values, their origin, secrets masked', () => {
  const dir = configDir('state_store = redis://app:hunter2@10.1.2.3:6379/0\n');
  const conf = path.join(dir, 'cl.conf');
  const r = run(['--print-config', '--config', conf], { CL_LANGUAGE: 'en-US', CL_TOOL_DIR: 'typo' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^tools_dir = ${dir}/my-tools  # ${conf}:1$`, 'm'));
  assert.match(r.stdout, /^session_secret = \*{8} {2}# /m);
  assert.doesNotMatch(r.stdout, /s3cr3t|hunter2/);
  assert.match(r.stdout, /^state_store = redis:\/\/app:\*\*\*@10\.1\.2\.3:6379\/0/m);
  assert.match(r.stdout, /^language = en-US {2}# env CL_LANGUAGE$/m);
  assert.match(r.stdout, /^listen = 127\.0\.0\.1:\d+ {2}# default$/m);
  assert.match(r.stderr, /environment CL_TOOL_DIR \(did you mean CL_TOOLS_DIR\?\) is not a setting/);
});

test('--check-config and --check-tools without a directory use the configured paths', () => {
  const dir = configDir();
  const conf = path.join(dir, 'cl.conf');
  // from another working directory: the relative paths are the file's
  let r = run(['--check-config', '--config', conf]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`configuration ${conf} is valid`));
  r = run(['--check-tools', '--config', conf]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`${dir}/my-tools: tools are valid`));
  // a broken tool fails both, naming file and line
  const bad = path.join(dir, 'bad-tools');
  fs.mkdirSync(bad);
  fs.writeFileSync(path.join(bad, 'broken.lua'), 'return {\n  name = "broken",\n  }}\n');
  fs.appendFileSync(conf, 'tools_dir = bad-tools\n');
  r = run(['--check-config', '--config', conf]);
  assert.equal(r.status, 2, r.stdout);
  assert.match(r.stderr, /broken\.lua:3:/);
  r = run(['--check-tools', '--config', conf]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /broken\.lua:3:/);
  // a missing directory names its key and the path as resolved, at start and in the check
  const gone = path.join(dir, 'cl-missing.conf');
  fs.writeFileSync(gone, 'tools_dir = no-such-tools\nlua_dir = runtime\n');
  r = run(['--config', gone]);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`config key tools_dir: ${dir}/no-such-tools: No such file or directory`));
  r = run(['--check-config', '--config', gone]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /config key tools_dir: .*no-such-tools/);
  // a config error names the key
  r = run(['--check-config', '--config', conf], { CL_WORKERS: '0' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /workers/);
});

test('--check-config: a file with three different mistakes prints all three as file:line: lines', () => {
  const dir = configDir();
  const conf = path.join(dir, 'cl.conf');
  // lines 1-3 are configDir's; the mistakes are on lines 4, 6 and 7
  fs.appendFileSync(conf, 'tool_dir = elsewhere\nlanguage = en-US\nlimits.max_body_bytes = lots\nupstream.vega.url http://vega:1\n');
  const r = run(['--check-config', '--config', conf]);
  assert.equal(r.status, 2, r.stdout);
  const lines = r.stderr.split('\n').filter((l) => l.startsWith(`${conf}:`));
  assert.deepEqual(lines, [
    `${conf}:4: unknown config key 'tool_dir' (did you mean tools_dir?)`,
    `${conf}:6: config key limits.max_body_bytes: 'lots' is not a non-negative integer`,
    `${conf}:7: expected 'key = value'`,
  ], r.stderr);
  assert.match(r.stderr, new RegExp(`context-loader: configuration ${conf}: 3 error\\(s\\)`));
  assert.doesNotMatch(r.stdout, /is valid/);
  // a check no single line carries names the line that set the key
  fs.writeFileSync(conf, `tools_dir = my-tools\nlua_dir = runtime\nworkers = 2\nadmin_listen = 10.1.2.3:30780\n`);
  const k = run(['--check-config', '--config', conf]);
  assert.equal(k.status, 2);
  const klines = k.stderr.split('\n').filter((l) => l.startsWith(`${conf}:`));
  assert.equal(klines.length, 2, k.stderr);
  assert.match(klines[0], new RegExp(`^${conf}:3: config key workers: workers > 1 needs a shared state_store`));
  assert.match(klines[1], new RegExp(`^${conf}:4: config key admin_listen: 10\\.1\\.2\\.3:30780 is not a loopback address`));
});

test('start-up: one line says what started; unknown CL_* variables are warned about', async () => {
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLZ_DIR: 'x' } });
  try {
    const parse = () => stack.server.logs.join('').split('\n').flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
    // the line follows the "listening" lines the stack waits for
    for (let i = 0; i < 400 && !parse().some((j) => j.msg === 'started'); i++) await new Promise((r) => setTimeout(r, 50)); // liveness only
    const lines = parse();
    const started = lines.filter((j) => j.msg === 'started');
    assert.equal(started.length, 1, 'one start-up line');
    const s = started[0];
    assert.equal(s.version, '0.1.0');
    assert.equal(s.tools_dir, path.join(ROOT, 'tools'));
    assert.ok(s.tools >= 20, `tool count ${s.tools}`);
    assert.equal(s.language, 'zh-CN');
    assert.equal(s.state_store, 'memory');
    assert.equal(s.workers, 1);
    assert.match(s.upstreams, /ontology_query/);
    assert.match(s.listen, /^127\.0\.0\.1:/);
    const warn = lines.find((j) => j.msg === 'environment variable is not a setting' && /^CL_TOOLZ_DIR/.test(j.variable));
    assert.ok(warn, 'CL_TOOLZ_DIR warned about');
    assert.equal(warn.level, 'warn');
    assert.match(warn.variable, /did you mean CL_TOOLS_DIR\?/);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('a rejected reload answers 422 with its reason phrase', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-cli-tools-'));
  for (const f of ['list_knowledge_networks.lua']) fs.copyFileSync(path.join(ROOT, 'tools', f), path.join(dir, f));
  fs.symlinkSync(path.join(ROOT, 'tools/_lib'), path.join(dir, '_lib'));
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: dir } });
  try {
    fs.writeFileSync(path.join(dir, 'broken.lua'), 'return {\n  name = "broken",\n  }}\n');
    const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 422);
    assert.equal(r.statusText, 'Unprocessable Content');
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('a port in use is a fatal error that names the system reason', async () => {
  const net = await import('node:net');
  const blocker = net.createServer();
  await new Promise((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const port = blocker.address().port;
  try {
    const r = run(['--config', path.join(ROOT, 'etc/context-loader.conf')], {
      CL_LISTEN: `127.0.0.1:${port}`, CL_ADMIN_LISTEN: '', CL_TOOLS_DIR: path.join(ROOT, 'tools'), CL_LUA_DIR: path.join(ROOT, 'lua'),
    });
    assert.equal(r.status, 1);
    const fatal = r.stderr.split('\n').flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } }).find((j) => j.msg === 'fatal');
    assert.ok(fatal, r.stderr);
    assert.equal(fatal.error, `cannot listen on 127.0.0.1:${port}: Address already in use`);
    assert.match(fatal.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  } finally {
    blocker.close();
  }
});

// A copy of list_knowledge_networks made into a new tool with four mistakes: a
// misspelt upstream (declared and in the request), a refused schema keyword and the
// original's order. Returns the text and the 1-based line of each needle.
function brokenCopy() {
  const src = fs.readFileSync(path.join(ROOT, 'tools/list_knowledge_networks.lua'), 'utf8');
  const text = src.replaceAll('list_knowledge_networks', 'get_kn_name').replaceAll('"bkn_backend"', '"bkn_backnd"')
    .replace(/(\n\s*name_pattern = \{\n)/, '$1                pattern = "^[0-9]+$",\n');
  const lines = text.split('\n');
  const lineOf = (re, from = 0) => lines.findIndex((l, i) => i >= from && re.test(l)) + 1;
  const origOrder = src.split('\n').findIndex((l) => /^\s*order = 110,/.test(l)) + 1;
  const decl = lineOf(/^\s*upstream = "bkn_backnd"/);
  return {
    text, origOrder, decl, order: lineOf(/^\s*order = 110,/), pattern: lineOf(/^\s*pattern = /),
    call: lineOf(/upstream = "bkn_backnd"/, decl),
  };
}

test('--check-tools --config: every error of the directory in one pass, each at its own line', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-loaderr-'));
  const tools = path.join(dir, 'tools');
  fs.mkdirSync(tools);
  fs.symlinkSync(path.join(ROOT, 'tools/_lib'), path.join(tools, '_lib'));
  fs.symlinkSync(path.join(ROOT, 'lua'), path.join(dir, 'runtime'));
  fs.writeFileSync(path.join(dir, 'cl.conf'), 'tools_dir = tools\nlua_dir = runtime\n');
  fs.copyFileSync(path.join(ROOT, 'tools/list_knowledge_networks.lua'), path.join(tools, 'list_knowledge_networks.lua'));
  fs.utimesSync(path.join(tools, 'list_knowledge_networks.lua'), new Date(2020, 1, 1), new Date(2020, 1, 1));
  const b = brokenCopy();
  assert.ok(b.decl > 0 && b.call > b.decl && b.pattern > 0 && b.order > 0 && b.origOrder > 0, JSON.stringify(b));
  fs.writeFileSync(path.join(tools, 'get_kn_name.lua'), b.text);
  const r = run(['--check-tools', 'tools', '--config', 'cl.conf'], {}, dir);
  assert.equal(r.status, 1, r.stdout);
  const up = "upstream: 'bkn_backnd' is not a configured upstream (did you mean bkn_backend?); configured: " +
    'ontology_query, bkn_backend, vega, operator_integration, mf_model_api, bkn_safe';
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('tools/'));
  assert.deepEqual(lines, [
    `tools/get_kn_name.lua:${b.decl}: ${up}`,
    `tools/get_kn_name.lua:${b.pattern}: input_schema/properties/name_pattern: unknown keyword 'pattern': not supported ` +
      '(Lua patterns are not ECMA regular expressions, so the core could not enforce what the model reads): use ' +
      'enum or const for a closed set, maxLength and format (an annotation) with the rule stated in description, ' +
      'and check the text in handle, returning a 400 error (errors.refuse of _lib.errors) when it does not fit',
    `tools/get_kn_name.lua:${b.call}: ${up}`,
    `tools/get_kn_name.lua:${b.order}: order 110 is already used by list_knowledge_networks ` +
      `(tools/list_knowledge_networks.lua:${b.origOrder})`,
  ], r.stderr);
  assert.match(r.stderr, /context-loader: tools: 4 error\(s\)/);
});

test('a misspelt upstream stops the start and a reload, not the first call', async () => {
  const b = brokenCopy();
  // only the upstream mistake: its own order, no refused keyword
  const text = b.text.replace(/order = 110,/, 'order = 119,').replace(/\n\s*pattern = "\^\[0-9\]\+\$",/, '');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-loaderr-up-'));
  fs.copyFileSync(path.join(ROOT, 'tools/list_knowledge_networks.lua'), path.join(dir, 'list_knowledge_networks.lua'));
  fs.symlinkSync(path.join(ROOT, 'tools/_lib'), path.join(dir, '_lib'));
  const want = new RegExp(`${dir}/get_kn_name\\.lua:${b.decl}: upstream: 'bkn_backnd' is not a configured upstream ` +
    '\\(did you mean bkn_backend\\?\\)');
  fs.writeFileSync(path.join(dir, 'get_kn_name.lua'), text);
  const start = run(['--config', path.join(ROOT, 'etc/context-loader.conf')], {
    CL_LISTEN: '127.0.0.1:0', CL_ADMIN_LISTEN: '', CL_TOOLS_DIR: dir, CL_LUA_DIR: path.join(ROOT, 'lua'),
  });
  assert.notEqual(start.status, 0);
  assert.match(start.stderr, want);
  fs.rmSync(path.join(dir, 'get_kn_name.lua'));
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: dir } });
  try {
    fs.writeFileSync(path.join(dir, 'get_kn_name.lua'), text);
    const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 422);
    assert.match((await r.json()).report, want);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});
