// The lean upstream client never hands a response to the wrong request. A hostile
// upstream (bkn_backend here) answers each GET /cross/<id> with a JSON body naming
// that id and the caller's account, and, per mode, also sends what a careless client
// would take for a later request's answer on that connection:
//   204   - a 204 whose claimed body (a whole response) comes 30 ms later;
//   101   - a 101, and a response 30 ms later;
//   clte  - a chunked answer whose Content-Length also covers a response sent 30 ms
//           later (the client must close these three connections at once, so when
//           the rest comes does not matter);
//   late  - a second, unsolicited copy of the answer while the connection is pooled:
//           between two waves of calls, with the gateway stopped (SIGSTOP) after the
//           next wave's requests were sent to it, so that when it runs again those
//           requests and the late bytes wait together, the requests first (the client
//           must look at a pooled connection before reusing it; a response sent while
//           the gateway's request is already on its way could not be told from the
//           answer to it, and none is sent then);
//   after - from the second request of a connection on, the previous answer again
//           right before the request's own, in one write (bytes beyond an answer).
// Concurrent callers of two principals, each with its own id: every answer a caller
// gets must carry its own id.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const DIR = path.join(ROOT, 'tests/fixtures/tools_hostile');
let mode = 'late';
let sentLate = 0; // unsolicited sends
const pendingLate = new Map(); // socket -> what it sends once the wave is over

// Sends the late parts on the connections still open; resolves once written.
async function flushLates() {
  const writes = [];
  for (const [s, data] of pendingLate) {
    if (!s.destroyed && s.writable) {
      writes.push(new Promise((resolve) => s.write(data, resolve)));
      sentLate++;
    }
  }
  pendingLate.clear();
  await Promise.all(writes);
}
let stack;
let upstream;

function response(id, account) {
  const body = JSON.stringify({ id, account });
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function chunked(text) {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`;
}

// Answers one request (its head, already read) on socket s, per mode.
function answer(s, head) {
  const target = head.split(' ')[1] || '';
  const m = /\/cross\/([^/?]+)/.exec(target);
  const id = m ? decodeURIComponent(m[1]) : target;
  const account = (/^x-account-id:\s*(.*)$/im.exec(head) || [])[1]?.trim() || '';
  const own = response(id, account);
  const later = mode === 'late'
    ? (data) => pendingLate.set(s, data)
    : (data) => setTimeout(() => { if (!s.destroyed && s.writable) { s.write(data); sentLate++; } }, 30);
  if (!m) { s.write(own); return; } // anything else the gateway may ask
  switch (mode) {
    case 'late':
      s.write(own);
      later(own); // the same answer again, unsolicited
      break;
    case '204': {
      s.write(`HTTP/1.1 204 No Content\r\nContent-Length: ${Buffer.byteLength(own)}\r\n\r\n`);
      later(own); // the body it claimed: a whole response
      break;
    }
    case '101':
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n');
      later(own);
      break;
    case 'clte': {
      const body = JSON.stringify({ id, account });
      const framed = chunked(body);
      s.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(framed) + Buffer.byteLength(own)}\r\nTransfer-Encoding: chunked\r\n\r\n${framed}`);
      later(own); // the rest of what Content-Length claimed
      break;
    }
    case 'after':
      if (s.previous) sentLate++;
      s.write((s.previous || '') + own);
      s.previous = own;
      break;
    default:
      s.write(own);
  }
}

before(async () => {
  upstream = net.createServer((s) => {
    s.setNoDelay(true);
    let buf = '';
    s.on('data', (d) => {
      buf += d.toString('latin1');
      let i;
      while ((i = buf.indexOf('\r\n\r\n')) >= 0) { // GETs only: no request body
        const head = buf.slice(0, i);
        buf = buf.slice(i + 4);
        answer(s, head);
      }
    });
    s.on('error', () => {});
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${upstream.address().port}/api/bkn-backend`;
  stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: DIR, CL_UPSTREAM_BKN_BACKEND_URL: base } });
});
after(async () => {
  if (stack) await stack.stop();
  if (upstream) await new Promise((r) => upstream.close(r));
});

const TOKENS = ['demo-user-token', 'demo-app-token'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function call(token, id) {
  const r = await fetch(`${stack.server.base}${PREFIX}/kn/cross_fetch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ id }),
    signal: AbortSignal.timeout(30000),
  });
  return { status: r.status, json: await r.json() };
}

// Waves of concurrent callers (two principals); returns the counts. In mode late,
// from the second wave on, the gateway is stopped while the wave's requests go out
// and the late parts are written, then continued.
async function run(m, waves = m === 'late' ? 20 : 12, perWave = 24) {
  mode = m;
  sentLate = 0;
  let wrong = 0, own = 0, other = 0;
  const samples = [];
  const pid = stack.server.proc.pid;
  for (let w = 0; w < waves; w++) {
    const stop = w > 0 && m === 'late';
    if (stop) process.kill(pid, 'SIGSTOP');
    const calls = [];
    try {
      for (let i = 0; i < perWave; i++) {
        const token = TOKENS[i % 2];
        const id = `${m}-${w}-${i}-${token.slice(5, 8)}`;
        calls.push(call(token, id).then((r) => {
          if (r.status === 200 && r.json.status === 200) {
            let got;
            try { got = JSON.parse(r.json.body).id; } catch { got = undefined; }
            if (got === id) own++;
            else { wrong++; if (samples.length < 3) samples.push(`${id} got ${r.json.body}`); }
          } else {
            other++;
          }
        }));
      }
      if (stop) {
        await sleep(20); // pacing only: the requests leave the test's process
        await flushLates();
      }
    } finally {
      if (stop) process.kill(pid, 'SIGCONT');
    }
    await Promise.all(calls);
  }
  return { wrong, own, other, samples, sentLate };
}

for (const m of ['late', '204', '101', 'clte', 'after']) {
  test(`hostile upstream (${m}): no caller gets an answer made for another request`, { timeout: 120000 }, async () => {
    const r = await run(m);
    console.log(`${m}: ${r.sentLate} unsolicited sends; ${r.own} own answers, ${r.other} other outcomes, ${r.wrong} crossed ${r.samples.join('; ')}`);
    // (connections the gateway closed after an answer out of place get nothing more)
    if (m === 'late' || m === 'after') assert.ok(r.sentLate > 0, 'the upstream sent nothing unsolicited');
    assert.equal(r.wrong, 0, `${r.wrong} answers went to the wrong request: ${r.samples.join('; ')}`);
  });
}
