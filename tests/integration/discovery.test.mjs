// What a client or a person finds without a token: the RFC 9728 protected resource
// metadata (when an authorization server is configured) and the challenge that points
// at it, and the admin listener's index.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';

test('RFC 9728 metadata: served when an authorization server is configured, named by the 401', async () => {
  const stack = await startStack({ capture: 'disabled', env: { CL_OAUTH_AUTHORIZATION_SERVERS: 'https://auth.example.com, https://auth2.example.com' } });
  try {
    const base = stack.server.base;
    // the challenge of an MCP request without a token points at the path's document
    const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(r.status, 401);
    const www = r.headers.get('www-authenticate');
    const m = www.match(/resource_metadata="([^"]+)"/);
    assert.ok(m, www);
    assert.equal(m[1], `${base}/.well-known/oauth-protected-resource${PREFIX}/mcp`);
    assert.doesNotMatch(www, /error=/, 'no credentials: no error code');
    // the document, without a token
    const d = await fetch(m[1]);
    assert.equal(d.status, 200);
    assert.equal(d.headers.get('access-control-allow-origin'), '*');
    assert.deepEqual(await d.json(), {
      resource: `${base}${PREFIX}/mcp`,
      authorization_servers: ['https://auth.example.com', 'https://auth2.example.com'],
      bearer_methods_supported: ['header'],
      resource_name: 'Context Loader',
    });
    const root = await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json();
    assert.equal(root.resource, `${base}${PREFIX}/mcp`);
    const compact = await (await fetch(`${base}/.well-known/oauth-protected-resource${PREFIX}/mcp-compact`)).json();
    assert.equal(compact.resource, `${base}${PREFIX}/mcp-compact`);
    assert.equal((await fetch(`${base}/.well-known/oauth-protected-resource${PREFIX}/kn/x`)).status, 404);
    assert.equal((await fetch(`${base}/.well-known/other`)).status, 404);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('without an authorization server: no metadata, no resource_metadata in the challenge', async () => {
  const stack = await startStack({ capture: 'disabled' });
  try {
    const d = await fetch(`${stack.server.base}/.well-known/oauth-protected-resource${PREFIX}/mcp`);
    assert.equal(d.status, 404);
    const body = await d.json();
    assert.equal(typeof body.code, 'string');
    const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(r.status, 401);
    assert.doesNotMatch(r.headers.get('www-authenticate'), /resource_metadata/);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('the admin listener lists its routes at /', async () => {
  const stack = await startStack({ capture: 'disabled' });
  try {
    const r = await fetch(`${stack.server.admin}/`);
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.service, 'context-loader');
    const paths = j.routes.map((x) => `${x.method} ${x.path}`);
    for (const p of ['GET /health/alive', 'GET /health/ready', 'GET /metrics', 'GET /admin/tools', 'POST /admin/reload']) {
      assert.ok(paths.includes(p), `${p} listed`);
    }
    for (const x of j.routes) assert.ok(x.description.length > 10);
    // every listed GET answers
    for (const x of j.routes.filter((y) => y.method === 'GET')) {
      assert.equal((await fetch(`${stack.server.admin}${x.path}`)).status, 200, x.path);
    }
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});
