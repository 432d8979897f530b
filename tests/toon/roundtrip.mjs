#!/usr/bin/env node
// roundtrip.mjs EXT_DIR: proves that TOON from the project's encoder (ENCODER_CMD, i.e.
// tests/toon/toon-encode) decodes with the reference decoder (@toon-format/toon 2.3.1
// `decode`, strict mode) to the same JSON value as the input text.
//
// Inputs: hand-written JSON texts (integers above 2^53 and beyond int64 written as
// text, exponent forms, tricky strings, every container shape), the simulator's
// kn_medical.json, and every non-folding input of the official encode fixtures.
//
// Comparison is lossless: the input is parsed by a small parser here that keeps each
// number as its text. The reference decoder turns every numeric token into a JS
// number with Number.parseFloat (documented in docs/toon.md): integers above 2^53 come
// back rounded (9007199254740993 -> 9007199254740992), never as strings. So a number
// whose text is exactly representable is compared exactly; for the others the decoded
// value must equal Number(text) (same place, same type) AND the TOON text must carry
// a numeric token with the same mathematical value as the input text (compared on
// normalised digits, not via double).
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { pathToFileURL, fileURLToPath } from 'node:url';

const ext = path.resolve(process.argv[2] ?? 'build/ext');
const cmd = process.env.ENCODER_CMD;
if (!cmd) { console.error('ENCODER_CMD is not set'); process.exit(2); }
const { decode } = await import(pathToFileURL(path.join(ext, 'node_modules/@toon-format/toon/dist/index.mjs')).href);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// ---- lossless JSON: numbers become { num: text }, objects keep [key, value] pairs
function parseLossless(text) {
  let i = 0;
  const ws = () => { while (/[ \t\r\n]/.test(text[i])) i++; };
  const str = () => { const m = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i)); i += m[0].length; return JSON.parse(m[0]); };
  function val() {
    ws();
    const c = text[i];
    if (c === '{') {
      i++; const pairs = []; ws();
      if (text[i] === '}') { i++; return { obj: pairs }; }
      for (;;) { ws(); const k = str(); ws(); i++; pairs.push([k, val()]); ws(); if (text[i++] === '}') return { obj: pairs }; }
    }
    if (c === '[') {
      i++; const arr = []; ws();
      if (text[i] === ']') { i++; return { arr }; }
      for (;;) { arr.push(val()); ws(); if (text[i++] === ']') return { arr }; }
    }
    if (c === '"') return str();
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]])
      if (text.startsWith(lit, i)) { i += lit.length; return v; }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i));
    i += m[0].length;
    return { num: m[0] };
  }
  const v = val(); ws();
  if (i !== text.length) throw new Error('trailing text');
  return v;
}

// Normalised mathematical value of a number text: sign, significant digits, point.
function normNum(t) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t);
  let digits = m[2] + (m[3] ?? ''), point = m[2].length + Number(m[4] ?? 0);
  const lead = digits.match(/^0*/)[0].length;
  digits = digits.slice(lead); point -= lead;
  digits = digits.replace(/0+$/, '');
  if (!digits) return '0';
  return `${m[1]}${digits}@${point}`;
}
const exact = (t) => normNum(String(Number(t))) === normNum(t);

// Numeric tokens of a TOON text outside quoted strings.
function toonNumbers(toon) {
  const out = new Set();
  const unquoted = toon.replace(/"(?:[^"\\]|\\.)*"/g, ' ');
  for (const m of unquoted.matchAll(/(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.\]])/gi)) out.add(normNum(m[0]));
  return out;
}

// rowKeys: a tabular array's rows take the first row's key order (§9.3 lets the
// others differ), so they may come back in that order.
function compare(orig, dec, where, bigs, rowKeys) {
  if (orig === null || typeof orig !== 'object') {
    if (dec !== orig) throw new Error(`${where}: ${JSON.stringify(dec)} != ${JSON.stringify(orig)}`);
    return;
  }
  if ('num' in orig) {
    if (typeof dec !== 'number') throw new Error(`${where}: not a number: ${JSON.stringify(dec)}`);
    const want = Number(orig.num) === 0 ? 0 : Number(orig.num);
    if (dec !== want) throw new Error(`${where}: ${dec} != ${orig.num}`);
    if (!exact(orig.num)) bigs.push([where, orig.num]);
    return;
  }
  if ('arr' in orig) {
    if (!Array.isArray(dec) || dec.length !== orig.arr.length) throw new Error(`${where}: array mismatch`);
    const objs = orig.arr.length > 0 && orig.arr.every((v) => v && typeof v === 'object' && 'obj' in v);
    const first = objs ? orig.arr[0].obj.map(([k]) => k) : undefined;
    const same = objs && orig.arr.every((v) => JSON.stringify(v.obj.map(([k]) => k).sort()) === JSON.stringify([...first].sort()));
    orig.arr.forEach((v, i) => compare(v, dec[i], `${where}[${i}]`, bigs, same ? first : undefined));
    return;
  }
  if (dec === null || typeof dec !== 'object' || Array.isArray(dec)) throw new Error(`${where}: object expected`);
  const keys = Object.keys(dec);
  const okeys = orig.obj.map(([k]) => k);
  if (JSON.stringify(keys) !== JSON.stringify(okeys) && !(rowKeys && JSON.stringify(keys) === JSON.stringify(rowKeys))) throw new Error(`${where}: keys ${JSON.stringify(keys)} != ${JSON.stringify(okeys)}`);
  orig.obj.forEach(([k, v]) => compare(v, dec[k], `${where}.${k}`, bigs));
}

const cases = [
  ['big ints', '{"drug_id":9007199254740993,"batch_no":12345678901234567890123,"neg":-12345678901234567890123,"max":9223372036854775807,"min":-9223372036854775808}'],
  ['big rows', '{"entries":[{"id":9007199254740993,"b":12345678901234567890123,"tags":[],"ext":{}},{"id":1,"b":20240001,"tags":["OTC"],"ext":{"k":"v"}}],"total":2}'],
  ['numbers', '[0,-0,1.5,1e6,1E-7,0.000001,1e21,123.456e2,0.30000000000000004,1.000000000000000005,1.23456789012345678901e5,1e-400,5e-324]'],
  ['strings', '["","-","- x"," a","b ","true","null","42","-3.14","1e-6","05","a:b","[x]","{y}","q\\"q","back\\\\slash","tab\\tnl\\nctl\\u0001","a,b","a|b","caf\\u00e9 \\ud83d\\ude00","\\u00a0x","x\\u3000"]'],
  ['keys', '{"my-key":1,"a.b":2,"_x":3,"9z":4,"":5,"sp ace":6,"quo\\"te":7}'],
  ['shapes', '{"e":[],"o":{},"m":[[1,2],[],["x"]],"mix":[1,[2],{"a":3},[{"b":1}],{}],"deep":{"a":{"b":{"c":[{"d":[{"e":1},{"e":2}],"f":1}]}}}}'],
  ['list items', '[{"rows":[{"a":1},{"a":2}],"n":2},{"e":[],"o":{},"l":[{"a":1},2]},{"x":{"y":1}}]'],
  ['root primitive', '"hello, world"'], ['root number', '12345678901234567890123'], ['root empty', '[]'],
];
cases.push(['kn_medical.json', fs.readFileSync(path.join(repo, 'tests/platform/data/kn_medical.json'), 'utf8')]);

const fixtures = path.join(ext, 'node_modules/@toon-format/spec/tests/fixtures/encode');
const jobs = cases.map(([name, text]) => ({ name, text, options: {} }));
for (const f of fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort()) {
  for (const t of JSON.parse(fs.readFileSync(path.join(fixtures, f), 'utf8')).tests) {
    if (t.shouldError || t.options?.keyFolding === 'safe') continue;
    jobs.push({ name: `${f} :: ${t.name}`, text: JSON.stringify(t.input), options: t.options ?? {} });
  }
}
for (const delimiter of ['\t', '|'])
  for (const [name, text] of cases.slice(0, 7)) jobs.push({ name: `${name} (delimiter ${JSON.stringify(delimiter)})`, text, options: { delimiter } });
jobs.push({ name: 'shapes (indent 4)', text: cases[5][1], options: { indent: 4 } });

let passed = 0, failed = 0, bigChecked = 0;
for (const job of jobs) {
  try {
    const toon = execFileSync(cmd, { input: job.text, env: { ...process.env, TOON_OPTIONS: JSON.stringify(job.options) } }).toString();
    const decoded = decode(toon, { indent: job.options.indent ?? 2, strict: true });
    const bigs = [];
    compare(parseLossless(job.text), decoded, '$', bigs);
    const nums = toonNumbers(toon);
    for (const [where, text] of bigs) {
      if (!nums.has(normNum(text))) throw new Error(`${where}: ${text} not found exactly in the TOON text`);
      bigChecked++;
    }
    passed++;
  } catch (e) {
    failed++;
    console.log(`FAIL ${job.name}: ${e.message}`);
  }
}
console.log(`${bigChecked} out-of-double numbers checked by digits`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
