// idle-conns.mjs PORT N: opens N keep-alive connections to 127.0.0.1:PORT, sends one
// GET /health/alive on each, waits for every answer, prints "ready N" and then holds
// the connections idle until it is killed (or for at most HOLD_S seconds, default 600).
// Exits 1 if a connection fails or is closed by the server while held.
import net from 'node:net';

const [port, nArg] = process.argv.slice(2);
const n = Number(nArg);
const hold = Number(process.env.HOLD_S || 600) * 1000;
const socks = [];
let answered = 0;
let ready = false;
const req = 'GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n';

function fail(msg) {
  console.error(`idle-conns: ${msg}`);
  process.exit(1);
}

function open(i) {
  return new Promise((resolve) => {
    const s = net.connect({ port: Number(port), host: '127.0.0.1' });
    let got = false;
    s.on('connect', () => { s.write(req); resolve(); });
    s.on('data', (d) => {
      if (!got && d.toString().startsWith('HTTP/1.1 200')) {
        got = true;
        if (++answered === n) { ready = true; console.log(`ready ${n}`); }
      }
    });
    s.on('error', (e) => fail(`connection ${i}: ${e.message}`));
    s.on('close', () => { if (ready) fail(`connection ${i} closed by the server while idle`); });
    socks.push(s);
  });
}

// Open in batches so the listen backlog is not overrun.
for (let i = 0; i < n; i += 200) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 200); j++) batch.push(open(j));
  await Promise.all(batch);
}
setTimeout(() => { if (!ready) fail(`only ${answered} of ${n} answered`); }, 60000).unref();
setTimeout(() => process.exit(0), hold);
