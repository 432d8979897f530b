#!/usr/bin/env node
// toon-bench.mjs BENCH_DIR C_DRIVER: generates the benchmark payloads, times JSON text ->
// TOON text with the project's encoder (C_DRIVER, tests/bench/toon-bench.c: json_parse +
// toon_encode) and with @toon-format/toon 2.3.1 on Node (JSON.parse + encode), same
// iterations, both warmed up; prints throughput, the ratio, bytes and tokens (gpt-tokenizer)
// for JSON vs TOON, and writes the table to BENCH_DIR/toon-results.txt.
// Run through tests/bench/toon-bench.sh, which builds the driver and installs the packages.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const benchDir = path.resolve(process.argv[2]);
const driver = process.argv[3];
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const req = createRequire(path.join(benchDir, 'package.json'));
const toonPkg = req.resolve('@toon-format/toon');
const { encode } = await import(pathToFileURL(toonPkg).href);
const tokenizer = await import(pathToFileURL(req.resolve('gpt-tokenizer')).href);
const countTokens = (s) => (tokenizer.countTokens ? tokenizer.countTokens(s) : tokenizer.encode(s).length);
const toonVersion = JSON.parse(fs.readFileSync(path.join(path.dirname(toonPkg), '../package.json'), 'utf8')).version;

// ---- payloads: query_object_instance results shaped like the simulator's ot_drug rows
const kn = JSON.parse(fs.readFileSync(path.join(repo, 'tests/platform/data/kn_medical.json'), 'utf8'));
const base = kn.instances.ot_drug;
const BIG = 9007199254740993n, HUGE = 12345678901234567890123n;
function rowsPayload(n) {
  const rows = [];
  for (let i = 0; i < n; i++) {
    const r = structuredClone(base[i % base.length]);
    r.drug_id = `__BIG__${BIG + BigInt(i)}`; // integers above 2^53, exact in the text
    r.batch_no = i % 3 === 0 ? `__BIG__${HUGE + BigInt(i)}` : 20240000 + i; // beyond int64
    if (i % 4 === 0) { r.tags = []; r.ext = {}; } // [] and {} fields
    rows.push(r);
  }
  const body = { datas: rows, total_count: n, search_after: [`__BIG__${BIG + BigInt(n)}`, 'drug'] };
  return JSON.stringify(body).replace(/"__BIG__(\d+)"/g, '$1');
}
// get_kn_detail-like: the network with its object types (properties), relation and action types.
function detailPayload() {
  const d = { ...kn };
  delete d.instances;
  return JSON.stringify(d);
}
const payloads = [
  { name: 'query 10 rows', text: rowsPayload(10), iters: 20000 },
  { name: 'query 1,000 rows', text: rowsPayload(1000), iters: 200 },
  { name: 'query 10,000 rows', text: rowsPayload(10000), iters: 20 },
  { name: 'kn detail (nested)', text: detailPayload(), iters: 5000 },
];
const scale = Number(process.env.TOON_BENCH_SCALE ?? 1); // fewer iterations for a quick look
for (const p of payloads) p.iters = Math.max(3, Math.round(p.iters * scale));

fs.mkdirSync(benchDir, { recursive: true });
const args = [];
payloads.forEach((p, i) => {
  p.file = path.join(benchDir, `payload-${i}.json`);
  fs.writeFileSync(p.file, p.text);
  args.push(p.file, String(p.iters));
});

// ---- reference: JSON.parse + encode, warmed up, same iterations
for (const p of payloads) {
  const one = () => encode(JSON.parse(p.text));
  for (let i = 0; i < Math.ceil(p.iters / 10) + 1; i++) one();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < p.iters; i++) p.refOut = one();
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  p.refOps = p.iters / dt;
  p.refMBs = (Buffer.byteLength(p.text) * p.iters) / dt / 1e6;
}

// ---- the project's encoder
const lines = execFileSync(driver, args, { maxBuffer: 1 << 26 }).toString().trim().split('\n');
lines.forEach((l, i) => {
  const [, , toonBytes, , , ops, mbs] = l.split(' ');
  Object.assign(payloads[i], { cOps: Number(ops), cMBs: Number(mbs), toonBytes: Number(toonBytes) });
});
for (const p of payloads) {
  p.toonText = execFileSync(path.join(path.dirname(driver), 'toon-encode'), { input: p.text, maxBuffer: 1 << 30 }).toString();
  p.jsonBytes = Buffer.byteLength(p.text);
  p.jsonTokens = countTokens(p.text);
  p.toonTokens = countTokens(p.toonText);
}

const pad = (s, n) => String(s).padStart(n);
const out = [];
out.push(`TOON encoder benchmark: JSON text -> TOON text (parse + encode), ${new Date().toISOString().slice(0, 10)}, ` +
  `node ${process.version}, @toon-format/toon ${toonVersion}, tokens: gpt-tokenizer (${tokenizer.default?.modelName ?? 'default encoding'})`);
out.push('');
out.push(`${'payload'.padEnd(20)}${pad('iters', 7)}${pad('C MB/s', 10)}${pad('C ops/s', 11)}${pad('ref MB/s', 10)}${pad('ref ops/s', 11)}${pad('ratio', 8)}` +
  `${pad('JSON B', 10)}${pad('TOON B', 10)}${pad('JSON tok', 10)}${pad('TOON tok', 10)}${pad('tok saved', 11)}`);
let allOk = true;
for (const p of payloads) {
  const ratio = p.cOps / p.refOps;
  if (ratio < 2) allOk = false;
  out.push(`${p.name.padEnd(20)}${pad(p.iters, 7)}${pad(p.cMBs.toFixed(1), 10)}${pad(p.cOps.toFixed(1), 11)}` +
    `${pad(p.refMBs.toFixed(1), 10)}${pad(p.refOps.toFixed(1), 11)}${pad(ratio.toFixed(1) + 'x', 8)}` +
    `${pad(p.jsonBytes, 10)}${pad(p.toonBytes, 10)}${pad(p.jsonTokens, 10)}${pad(p.toonTokens, 10)}` +
    `${pad((100 * (1 - p.toonTokens / p.jsonTokens)).toFixed(1) + '%', 11)}`);
}
out.push('');
out.push(`MB/s = MB (1e6 bytes) of JSON input per second; ratio = C ops/s / reference ops/s (target >= 2x): ${allOk ? 'met on every payload' : 'NOT met'}`);
out.push('Note: the reference parses with JSON.parse, so its integers above 2^53 are already rounded; the C side keeps them exact.');
const text = out.join('\n');
console.log(text);
fs.writeFileSync(path.join(benchDir, 'toon-results.txt'), text + '\n');
process.exit(allOk ? 0 : 1);
