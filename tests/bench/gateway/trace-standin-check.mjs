// trace-standin-check.mjs PORT TC_DIR: checks a running gateway/trace-standin.c on
// 127.0.0.1:PORT over raw sockets - pipelined requests answered in order (three in one
// write, and a request split over writes), the bodies byte for byte from TC_DIR, and
// the refusals (chunked framing, malformed, too large: an error and the close;
// Connection: close honoured). Prints one line per check; exits 1 on the first failure.
import fs from 'node:fs';
import net from 'node:net';
import assert from 'node:assert/strict';

const [port, dir] = process.argv.slice(2);
const V1 = '/api/agent-observability/v1';
const file = (n) => fs.readFileSync(`${dir}/${n}.json`, 'utf8').trim();
const post = (path, body, extra = '') =>
  `POST ${V1}${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const get = (path, extra = '') => `GET ${V1}${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const ENSURE = '/conversations/c1/interactions/i1/operations:ensure';
const COMPLETE = '/operations/op_1/attempts/1:complete';

// Writes each chunk (pausing between them), collects the answers until `count` are
// complete or the server closes; resolves {responses, closed}. With stallMs, nothing is
// read for that long first (the server's sends fill the socket and wait).
function exchange(chunks, count, stallMs = 0) {
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), '127.0.0.1');
    if (stallMs) {
      s.pause();
      setTimeout(() => s.resume(), stallMs);
    }
    let data = Buffer.alloc(0), done = false;
    const responses = [];
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ responses, closed });
    };
    const timer = setTimeout(() => (done = true, s.destroy(), reject(new Error('timeout'))), 5000 + stallMs);
    s.on('data', (d) => {
      data = Buffer.concat([data, d]);
      for (;;) {
        const e = data.indexOf('\r\n\r\n');
        if (e < 0) break;
        const head = data.subarray(0, e).toString('latin1');
        const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
        if (data.length < e + 4 + len) break;
        responses.push({ status: Number(head.split(' ')[1]), head, body: data.subarray(e + 4, e + 4 + len).toString() });
        data = data.subarray(e + 4 + len);
      }
      if (responses.length >= count && count > 0) finish(false);
    });
    s.on('end', () => finish(true));
    s.on('error', () => finish(true));
    (async () => {
      for (const c of chunks) {
        s.write(c);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
  });
}

async function check(name, fn) {
  await fn();
  console.log(`ok  ${name}`);
}

await check('three pipelined requests in one write: three answers in order', async () => {
  const { responses } = await exchange([post(ENSURE, '{"a":1}') + get('/interactions/int_1') + post(COMPLETE, '{}')], 3);
  assert.deepEqual(responses.map((r) => r.status), [200, 200, 200]);
  assert.equal(responses[0].body, file('ensure'));
  assert.equal(responses[1].body, file('interaction'));
  assert.equal(responses[2].body, file('complete'));
  assert.match(responses[0].head, /\r\ncontent-type: application\/json/i);
});
await check('a request split over writes (head, then half the body) waits for its rest', async () => {
  const r = post(ENSURE, '{"operation_key":"k","input":{"x":1}}') + get('/health');
  const { responses, closed } = await exchange([r.slice(0, 20), r.slice(20, r.indexOf('\r\n\r\n') + 10), r.slice(r.indexOf('\r\n\r\n') + 10)], 2);
  assert.deepEqual(responses.map((x) => x.status), [200, 200]);
  assert.equal(responses[0].body, file('ensure'));
  assert.equal(responses[1].body, file('health'));
  assert.equal(closed, false);
});
await check('the policy file read on each request', async () => {
  const { responses } = await exchange([get('/capture-policy')], 1);
  assert.equal(responses[0].body, fs.readFileSync(`${dir}/policy.json`, 'utf8'));
});
await check('unknown route: 404 with a JSON error, the connection kept', async () => {
  const { responses } = await exchange([get('/nope') + get('/health')], 2);
  assert.deepEqual(responses.map((x) => x.status), [404, 200]);
  assert.equal(JSON.parse(responses[0].body).error.code, 'not_found');
});
await check('Connection: close: answered, then closed; what follows is not answered', async () => {
  const { responses, closed } = await exchange([get('/health', 'Connection: close\r\n') + get('/health')], 0);
  assert.equal(responses.length, 1);
  assert.match(responses[0].head, /\r\nconnection: close/i);
  assert.ok(closed);
});
await check('chunked framing: 400 and close', async () => {
  const req = `POST ${V1}${ENSURE} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`;
  const { responses, closed } = await exchange([req], 0);
  assert.deepEqual(responses.map((x) => x.status), [400]);
  assert.ok(closed);
});
await check('malformed request line and header: 400 and close', async () => {
  for (const req of ['GARBAGE\r\n\r\n', `GET ${V1}/health HTTP/1.1\r\nno colon\r\n\r\n`, `GET ${V1}/health HTTP/2.0\r\n\r\n`,
    `POST ${V1}${ENSURE} HTTP/1.1\r\nContent-Length: 1x\r\n\r\n`]) {
    const { responses, closed } = await exchange([req], 0);
    assert.deepEqual(responses.map((x) => x.status), [400], req);
    assert.ok(closed);
  }
});
await check('a request over 1 MiB: 413 and close, before its body is sent', async () => {
  const req = `POST ${V1}${ENSURE} HTTP/1.1\r\nHost: x\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`;
  const { responses, closed } = await exchange([req], 0);
  assert.deepEqual(responses.map((x) => x.status), [413]);
  assert.ok(closed);
});
await check('100 pipelined requests in one write: 100 answers in order', async () => {
  const reqs = [];
  for (let i = 0; i < 100; i++) reqs.push(i % 2 ? post(COMPLETE, `{"n":${i}}`) : post(ENSURE, `{"n":${i}}`));
  const { responses } = await exchange([reqs.join('')], 100);
  assert.equal(responses.length, 100);
  responses.forEach((r, i) => assert.equal(r.body, file(i % 2 ? 'complete' : 'ensure')));
});
await check('20000 pipelined requests, answers not read for 1 s (sends left partial, finished later): all, in order', async () => {
  const reqs = [];
  for (let i = 0; i < 20000; i++) reqs.push(i % 2 ? post(COMPLETE, `{"n":${i}}`) : get('/interactions/i'));
  const { responses } = await exchange([reqs.join('')], 20000, 1000);
  assert.equal(responses.length, 20000);
  responses.forEach((r, i) => assert.equal(r.body, file(i % 2 ? 'complete' : 'interaction')));
});
