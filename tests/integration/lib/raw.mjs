// Raw HTTP/1.1 over node:net for the tests that must send exactly the bytes they
// mean (an HTTP client would normalise or refuse them).
import net from 'node:net';

// Sends raw (string or Buffer) and collects what the server sends until it closes
// the connection or timeoutMs passes. opts.pieces: send in pieces of that many bytes,
// one per event-loop turn; opts.then(send, dataSoFar): called on every arrival.
export function exchange(port, raw, { timeoutMs = 5000, pieces = 0, then, host = '127.0.0.1' } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host });
    let data = '';
    let closed = false;
    const timer = setTimeout(() => { sock.destroy(); resolve({ data, closed }); }, timeoutMs);
    sock.on('data', (c) => { data += c.toString('latin1'); if (then) then((x) => sock.write(x), data); });
    sock.on('error', (e) => { if (e.code !== 'ECONNRESET' && e.code !== 'EPIPE') { clearTimeout(timer); reject(e); } });
    sock.on('close', () => { closed = true; clearTimeout(timer); resolve({ data, closed }); });
    sock.on('connect', async () => {
      const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(raw, 'latin1');
      if (!pieces) { sock.write(buf); return; }
      for (let i = 0; i < buf.length && !sock.destroyed; i += pieces) {
        sock.write(buf.subarray(i, i + pieces));
        await new Promise((r) => setTimeout(r, 1));
      }
    });
  });
}

// Splits what a server sent into responses {status, headers (lower-case names), body}
// (Content-Length bodies; a 1xx response has none).
export function parseResponses(data) {
  const out = [];
  let rest = data;
  while (rest.length) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const lines = rest.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
    if (!m) break;
    const headers = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const status = Number(m[1]);
    const len = status < 200 ? 0 : Number(headers['content-length'] ?? 0);
    const body = Buffer.from(rest.slice(end + 4), 'latin1').subarray(0, len).toString();
    out.push({ status, headers, body });
    rest = rest.slice(end + 4 + Buffer.from(body).length);
  }
  return out;
}
