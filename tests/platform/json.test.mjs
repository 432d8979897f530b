// Unit tests of the lossless JSON module.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, stringify, LosslessNumber, JsonParseError, compareNumeric, KEY_ORDER } from './lib/json.mjs';

test('big integers parse as BigInt and re-serialize byte-exact', () => {
  const text = '{"a":9007199254740993,"b":-9223372036854775809,"c":12345678901234567890123,"d":9007199254740991}';
  const v = parse(text);
  assert.equal(v.a, 9007199254740993n);
  assert.equal(typeof v.d, 'number');
  assert.equal(stringify(v), text);
});

test('numbers that do not round-trip keep their text', () => {
  for (const t of ['1.0', '1e5', '-0', '0.10000000000000001', '1e400', '12500.50', '1E+2']) {
    const v = parse(t);
    assert.ok(v instanceof LosslessNumber, t);
    assert.equal(stringify(v), t);
  }
  assert.equal(parse('0.5'), 0.5);
  assert.equal(parse('-12'), -12);
});

test('empty containers, key order and escapes survive', () => {
  const text = '{"z":[],"a":{},"2":"two","1":"one","s":"\\u00e9\\n\\"x\\"","n":null,"t":true}';
  const v = parse(text);
  assert.deepEqual(v[KEY_ORDER], ['z', 'a', '2', '1', 's', 'n', 't']);
  assert.equal(stringify(v), '{"z":[],"a":{},"2":"two","1":"one","s":"é\\n\\"x\\"","n":null,"t":true}');
  // __proto__ is ordinary data.
  const p = parse('{"__proto__":{"x":1}}');
  assert.equal(Object.getPrototypeOf(p), Object.prototype);
  assert.equal(stringify(p), '{"__proto__":{"x":1}}');
});

test('invalid JSON is rejected with an offset', () => {
  for (const bad of ['', '{', '[1,]', '{"a":1,}', '01', '1.', '-', '"\\x"', '"a\nb"', 'nul', '[1] x', "{'a':1}", 'NaN']) {
    assert.throws(() => parse(bad), JsonParseError, JSON.stringify(bad));
  }
  assert.throws(() => parse('['.repeat(600) + ']'.repeat(600)), /too deep/);
  try {
    parse('[1, 2, x]');
  } catch (e) {
    assert.equal(e.offset, 7);
  }
});

test('compareNumeric is exact for integers', () => {
  assert.equal(compareNumeric(9007199254740993n, 9007199254740992n), 1);
  assert.equal(compareNumeric(parse('9007199254740992'), 9007199254740992n), 0);
  assert.equal(compareNumeric(1, new LosslessNumber('1.0')), 0);
  assert.equal(compareNumeric(1.5, 2n), -1);
});
