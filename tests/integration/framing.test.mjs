// Request framing over raw sockets (node:net: an HTTP client would normalise these
// requests): ambiguous framing gets one JSON 400 and the connection closes, so a
// request smuggled behind it is never served; the errors libevent used to answer
// with HTML pages (lengths, sizes, chunks, methods, versions) are JSON error
// envelopes with the matching status and text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';
import { exchange, parseResponses } from './lib/raw.mjs';

let stack;
let port;
const REST = `${PREFIX}/kn/query_object_instance`;
const BODY = '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":1}';
const AUTH = 'Authorization: Bearer demo-user-token\r\n';
const ALIVE = 'GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

before(async () => {
  stack = await startStack({ capture: 'disabled', env: { CL_LIMITS_MAX_HEADER_BYTES: '4096', CL_LIMITS_MAX_BODY_BYTES: '2048' } });
  port = Number(new URL(stack.server.base).port);
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0, 'the server did not exit cleanly (sanitizer report?)');
});

// One refused request: exactly one JSON error answer, then the server closes.
async function refused(raw, status, detailRe) {
  const r = await exchange(port, raw);
  const rs = parseResponses(r.data);
  assert.equal(rs.length, 1, `expected one response, got ${rs.length}:\n${r.data}`);
  const [res] = rs;
  assert.equal(res.status, status, r.data);
  assert.match(res.headers['content-type'] ?? '', /^application\/json/, r.data);
  assert.equal(res.headers.connection, 'close', r.data);
  assert.match(res.headers['bkn-request-id'] ?? '', /^req_/);
  const j = JSON.parse(res.body);
  assert.equal(typeof j.code, 'string');
  assert.equal(typeof j.description, 'string');
  // the envelope rules: retryable always, a wait only when retryable, no link placeholder
  assert.equal(typeof j.retryable, 'boolean', res.body);
  assert.equal('retry_after_ms' in j, j.retryable, res.body);
  assert.equal('link' in j, false, res.body);
  assert.equal(typeof j.required_action, 'string', res.body);
  if (detailRe) assert.match(j.details, detailRe, res.body);
  assert.ok(r.closed, 'the server kept the connection open');
  return { res, json: j };
}

async function stillServing() {
  const r = await exchange(port, `POST ${REST} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${AUTH}Content-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`);
  const [res] = parseResponses(r.data);
  assert.equal(res?.status, 200, r.data);
}

const post = (headers, body) => `POST ${REST} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${AUTH}${headers}\r\n${body}`;

test('two different Content-Length headers: 400 and close; the bytes behind are not a second request', async () => {
  // read with the first length, "{}" is the body and ALIVE a second request
  const { json } = await refused(post(`Content-Length: 2\r\nContent-Length: ${2 + ALIVE.length}\r\n`, `{}${ALIVE}`), 400, /Content-Length/);
  assert.equal(json.code, 'Public.BadRequest');
  await stillServing();
});

test('Transfer-Encoding with a space before the colon: 400 and close', async () => {
  await refused(post('Transfer-Encoding : chunked\r\n', `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`), 400, /冒号/); // the deployment's language, zh-CN
  await stillServing();
});

test('Content-Length: +51 is malformed: 400', async () => {
  await refused(post(`Content-Length: +${BODY.length}\r\n`, BODY), 400, /Content-Length/);
});

test('obsolete line folding: 400', async () => {
  await refused(post(`X-Note: first\r\n  folded\r\nContent-Length: ${BODY.length}\r\n`, BODY), 400, /折行/);
});

test('two Authorization headers: 400 (never "the first wins")', async () => {
  await refused(post(`Authorization: Bearer other-token\r\nContent-Length: ${BODY.length}\r\n`, BODY), 400, /Authorization/);
  await stillServing();
});

test('Transfer-Encoding together with Content-Length, and codings other than chunked', async () => {
  await refused(post(`Transfer-Encoding: chunked\r\nContent-Length: ${BODY.length}\r\n`, BODY), 400, /Transfer-Encoding/);
  await refused(post('Transfer-Encoding: gzip, chunked\r\n', '0\r\n\r\n'), 501, /传输编码/);
});

test('request line errors libevent answered with HTML: JSON 501, 505, 400 (HTTP/0.9), 414', async () => {
  const m = await refused('BREW /pot HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 501, /请求方法/);
  assert.equal(m.json.code, 'Public.NotImplemented');
  await refused('GET /health/alive HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n', 505, /HTTP 版本/);
  await refused('GET /health/alive\r\n\r\n', 400, /HTTP\/0\.9/);
  await refused('GET http://a:b/health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 400, /主机部分/);
  const long = await refused(`GET /health/alive?${'q'.repeat(20000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 414, /请求行/);
  assert.equal(long.json.code, 'Public.URITooLong');
  await stillServing();
});

test('oversized header block: JSON 413 that names the header block, not the body', async () => {
  for (const pad of [5000, 40000]) { // over the limit, and far over libevent's own cap
    const zh = await refused(`GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ${'p'.repeat(pad)}\r\n\r\n`, 413, /请求头超过/);
    assert.equal(zh.json.code, 'Public.RequestEntityTooLarge');
    assert.doesNotMatch(zh.json.description, /请求体/);
  }
  const en = await refused(`GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Language: en\r\nX-Pad: ${'p'.repeat(5000)}\r\n\r\n`, 413, /请求头超过/); // never read: the deployment's language
  assert.doesNotMatch(en.json.description, /body/i);
});

test('body larger than libevent\'s own cap: JSON 413 naming limits.max_body_bytes', async () => {
  const big = 'x'.repeat(10000);
  await refused(post(`Content-Length: ${big.length}\r\n`, big), 413, /limits\.max_body_bytes/);
  const chunks = `${(3000).toString(16)}\r\n${'y'.repeat(3000)}\r\n0\r\n\r\n`;
  await refused(post('Transfer-Encoding: chunked\r\n', chunks), 413, /limits\.max_body_bytes/);
  // within the limit in data, but with five bytes of framing per byte held back
  await refused(post('Transfer-Encoding: chunked\r\n', `${'1\r\nz\r\n'.repeat(1500)}0\r\n\r\n`), 413, /分帧开销/);
  await stillServing();
});

test('bad chunk size, chunk extensions, trailer fields: JSON 400', async () => {
  await refused(post('Transfer-Encoding: chunked\r\n', 'zz\r\nhello\r\n0\r\n\r\n'), 400, /分块大小/);
  await refused(post('Transfer-Encoding: chunked\r\n', `${BODY.length.toString(16)};x=1\r\n${BODY}\r\n0\r\n\r\n`), 400, /分块扩展/);
  await refused(post('Transfer-Encoding: chunked\r\n', `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\nAuthorization: Bearer x\r\n\r\n`), 400, /尾部字段/);
  // after 100-continue the head has gone on: a bad chunk then closes the connection
  let sent = false;
  const r = await exchange(port, post('Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n', ''), {
    then: (send, data) => { if (!sent && data.includes('100 Continue')) { sent = true; send('5\r\nhello\r\nzz\r\n'); } },
  });
  assert.ok(sent && r.closed, r.data);
  assert.equal(r.data, 'HTTP/1.1 100 Continue\r\n\r\n');
  await stillServing();
});

test('Expect other than 100-continue: 417', async () => {
  await refused(post(`Expect: teapot\r\nContent-Length: ${BODY.length}\r\n`, BODY), 417, /100-continue/);
});

test('well-framed requests still work: chunked, pipelined, 100-continue, leading empty line', async () => {
  const half = Math.floor(BODY.length / 2);
  const chunked = post('Transfer-Encoding: chunked\r\n', `${half.toString(16)}\r\n${BODY.slice(0, half)}\r\n${(BODY.length - half).toString(16)}\r\n${BODY.slice(half)}\r\n0\r\n\r\n`);
  const plain = post(`Content-Length: ${BODY.length}\r\n`, BODY);
  const r = await exchange(port, `\r\n${chunked}${plain}${ALIVE.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')}`);
  const rs = parseResponses(r.data);
  assert.deepEqual(rs.map((x) => x.status), [200, 200, 200], r.data);
  assert.equal(JSON.parse(rs[0].body).datas.length, 1);
  assert.deepEqual(JSON.parse(rs[2].body), { status: 'alive' });
  // 100-continue: the head goes through at once, the server says 100, then the body
  const e = await exchange(port, post(`Expect: 100-continue\r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n`, ''), { then: (send, data) => (data.includes('100 Continue') ? send(BODY) : undefined) });
  assert.match(e.data, /^HTTP\/1\.1 100 Continue\r\n\r\n/);
  assert.equal(parseResponses(e.data.slice(e.data.indexOf('\r\n\r\n') + 4))[0]?.status, 200, e.data);
  // the stand-in the server uses for a refused request is refused by position, not by
  // its path: sent by a client it is an ordinary unknown route
  const marker = await exchange(port, 'GET /.refused HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  assert.equal(parseResponses(marker.data)[0]?.status, 404, marker.data);
  await stillServing();
});

test('a request sent in small pieces is framed the same way', async () => {
  const raw = post(`Content-Length: ${BODY.length}\r\nConnection: close\r\n`, BODY);
  const r = await exchange(port, raw, { pieces: 7 });
  assert.equal(parseResponses(r.data)[0]?.status, 200, r.data);
  const bad = await exchange(port, post(`Content-Length: 2\r\nContent-Length: ${2 + ALIVE.length}\r\n`, `{}${ALIVE}`), { pieces: 5 });
  const rs = parseResponses(bad.data);
  assert.deepEqual(rs.map((x) => x.status), [400], bad.data);
});

test('mutated requests: never an HTML answer, the server keeps serving', async () => {
  const seeds = [
    post(`Content-Length: ${BODY.length}\r\n`, BODY),
    post('Transfer-Encoding: chunked\r\n', `5\r\nhello\r\n0\r\n\r\n`),
    'GET /health/alive HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\nGET /health/ready HTTP/1.0\r\n\r\n',
    'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n',
  ];
  const bits = ['\r', '\n', ' ', '\t', ':', '0', '9', 'f', '-', '+', ';', '/', '?', '#', '%', '[', ']', '@', '\x00', '\x7f', '\xff',
    'HTTP/1.1', 'Content-Length: 3\r\n', 'Transfer-Encoding: chunked\r\n', '\r\n\r\n', 'Host: y\r\n', ' chunked', 'http://a:b'];
  let seed = 7;
  const rnd = (k) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % k; };
  const one = async () => {
    let s = seeds[rnd(seeds.length)];
    for (let m = 1 + rnd(4); m > 0; m--) {
      const pos = rnd(s.length + 1), op = rnd(3), bit = bits[rnd(bits.length)];
      s = op === 0 ? s.slice(0, pos) + bit + s.slice(pos)
        : op === 1 ? s.slice(0, pos) + s.slice(pos + 1 + rnd(4))
          : s.slice(0, pos) + bit + s.slice(pos + bit.length);
    }
    const r = await exchange(port, s, { timeoutMs: 500, pieces: rnd(3) ? 0 : 1 + rnd(20) });
    assert.doesNotMatch(r.data, /<html/i, `HTML answer to ${JSON.stringify(s)}`);
    for (const res of parseResponses(r.data)) {
      if (res.status >= 400) assert.equal(typeof JSON.parse(res.body).code, 'string', res.body);
    }
  };
  for (let round = 0; round < 8; round++) await Promise.all(Array.from({ length: 30 }, one));
  await stillServing();
});

// The reply's header block, byte for byte in its layout: one Date in RFC 1123 form
// (GMT, now) on an HTTP/1.1 reply and none on an HTTP/1.0 one, one Content-Length,
// the request id, no-store and the type, in that order.
test('reply header block: Date on HTTP/1.1 only, each header once, in order', async () => {
  const names = (data) => data.slice(0, data.indexOf('\r\n\r\n')).split('\r\n').slice(1).map((l) => l.slice(0, l.indexOf(':')));
  const before = Math.floor(Date.now() / 1000);
  const r11 = await exchange(port, `POST ${REST} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${AUTH}Content-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`);
  const after = Math.ceil(Date.now() / 1000);
  const [res] = parseResponses(r11.data);
  assert.equal(res?.status, 200, r11.data);
  const date = res.headers.date ?? '';
  assert.match(date, /^(Sun|Mon|Tue|Wed|Thu|Fri|Sat), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/, date);
  const t = Date.parse(date) / 1000;
  assert.ok(t >= before && t <= after, `Date ${date} is not now`);
  assert.equal(new Date(t * 1000).toUTCString(), date);
  const n11 = names(r11.data);
  for (const h of ['Date', 'Content-Length', 'bkn-request-id', 'Cache-Control', 'Content-Type'])
    assert.equal(n11.filter((x) => x.toLowerCase() === h.toLowerCase()).length, 1, `${h} in ${n11}`);
  const at = (h) => n11.findIndex((x) => x.toLowerCase() === h.toLowerCase());
  assert.ok(at('bkn-request-id') < at('Cache-Control') && at('Cache-Control') < at('Content-Type') &&
    at('Content-Type') < at('Date') && at('Date') < at('Content-Length'), n11.join(', '));
  const r10 = await exchange(port, 'GET /health/alive HTTP/1.0\r\n\r\n');
  const [res10] = parseResponses(r10.data);
  assert.equal(res10?.status, 200, r10.data);
  assert.equal(res10.headers.date, undefined, r10.data);
  const alive = await exchange(port, 'GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.match(parseResponses(alive.data)[0]?.headers.date ?? '', / GMT$/, alive.data);
});
