// Lossless JSON for the platform simulator.
//
// Node's JSON.parse turns every number into a double, so 9007199254740993 comes
// back as ...992, and it reorders integer-like object keys. The platform sends
// 64-bit identifiers and the gateway must pass them through byte-exact, so the
// simulator parses and serializes with this module instead:
//   * integer tokens inside the safe range  -> number
//   * integer tokens outside it             -> BigInt
//   * other numbers whose text is not what String(Number(text)) gives back
//     (1.0, 1e5, -0, 0.10000000000000001, 1e400) -> LosslessNumber (keeps the text)
//   * other numbers                         -> number
//   * object key order is kept exactly, even for integer-like keys (see KEY_ORDER)
// stringify() writes all of these back as they came in.

/** A number whose source text must survive untouched. */
export class LosslessNumber {
  constructor(text) {
    this.text = text;
  }
  valueOf() {
    return Number(this.text);
  }
  toString() {
    return this.text;
  }
  /** True when the token has no fraction and no exponent. */
  get isInteger() {
    return /^-?\d+$/.test(this.text);
  }
}

// JS objects list integer-like keys ("1", "42") before the others. When a parsed
// object has such keys, the source order is stored under this symbol and used by
// stringify(); keys added later are written after the recorded ones.
export const KEY_ORDER = Symbol('json.keyOrder');

export class JsonParseError extends Error {
  constructor(message, offset) {
    super(`${message} at offset ${offset}`);
    this.offset = offset;
  }
}

const MAX_DEPTH = 512;
const INDEX_LIKE = /^(0|[1-9]\d*)$/;

/**
 * Parse JSON text. Throws JsonParseError (with a character offset) on any
 * deviation from RFC 8259.
 */
export function parse(text) {
  if (typeof text !== 'string') throw new TypeError('parse expects a string');
  let i = 0;
  const n = text.length;

  const fail = (msg) => {
    throw new JsonParseError(msg, i);
  };
  const ws = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };

  const parseString = () => {
    // Caller checked text[i] === '"'.
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('control character in string');
      if (c === 0x5c) {
        out += text.slice(start, i);
        i++;
        const e = text[i];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            const hex = text.slice(i + 1, i + 5);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
            out += String.fromCharCode(parseInt(hex, 16));
            i += 4;
            break;
          }
          default:
            fail('bad escape');
        }
        i++;
        start = i;
        continue;
      }
      i++;
    }
  };

  const parseNumber = () => {
    const start = i;
    if (text[i] === '-') i++;
    if (text[i] === '0') {
      i++;
    } else if (text[i] >= '1' && text[i] <= '9') {
      while (text[i] >= '0' && text[i] <= '9') i++;
    } else {
      fail('bad number');
    }
    let integer = true;
    if (text[i] === '.') {
      integer = false;
      i++;
      if (!(text[i] >= '0' && text[i] <= '9')) fail('bad fraction');
      while (text[i] >= '0' && text[i] <= '9') i++;
    }
    if (text[i] === 'e' || text[i] === 'E') {
      integer = false;
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (!(text[i] >= '0' && text[i] <= '9')) fail('bad exponent');
      while (text[i] >= '0' && text[i] <= '9') i++;
    }
    const tok = text.slice(start, i);
    if (integer) {
      if (tok === '-0') return new LosslessNumber(tok);
      const v = Number(tok);
      return Number.isSafeInteger(v) ? v : BigInt(tok);
    }
    const v = Number(tok);
    return Number.isFinite(v) && String(v) === tok ? v : new LosslessNumber(tok);
  };

  const parseValue = (depth) => {
    ws();
    if (i >= n) fail('unexpected end of input');
    const c = text[i];
    if (c === '{') {
      if (depth >= MAX_DEPTH) fail('nesting too deep');
      i++;
      const obj = {};
      const order = [];
      let indexLike = false;
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected object key');
        const key = parseString();
        ws();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        const val = parseValue(depth + 1);
        if (!Object.prototype.hasOwnProperty.call(obj, key)) order.push(key);
        if (INDEX_LIKE.test(key)) indexLike = true;
        // defineProperty so a "__proto__" key is data, not a prototype change.
        Object.defineProperty(obj, key, { value: val, enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          break;
        }
        fail("expected ',' or '}'");
      }
      if (indexLike) Object.defineProperty(obj, KEY_ORDER, { value: order, enumerable: false });
      return obj;
    }
    if (c === '[') {
      if (depth >= MAX_DEPTH) fail('nesting too deep');
      i++;
      const arr = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          break;
        }
        fail("expected ',' or ']'");
      }
      return arr;
    }
    if (c === '"') return parseString();
    if (c === 't' && text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (c === 'f' && text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (c === 'n' && text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    if (c === '-' || (c >= '0' && c <= '9')) return parseNumber();
    return fail('unexpected character');
  };

  const v = parseValue(0);
  ws();
  if (i !== n) fail('trailing data');
  return v;
}

/** Keys of obj in output order (recorded source order first, then new keys). */
export function keysOf(obj) {
  const own = Object.keys(obj);
  const order = obj[KEY_ORDER];
  if (!order) return own;
  const present = new Set(own);
  const out = order.filter((k) => present.has(k));
  const seen = new Set(out);
  for (const k of own) if (!seen.has(k)) out.push(k);
  return out;
}

/**
 * Serialize a value to compact JSON. BigInt and LosslessNumber are written
 * exactly; undefined members are skipped (as JSON.stringify does); non-finite
 * numbers become null. `space` (a number) pretty-prints, for files only.
 */
export function stringify(value, space = 0) {
  const pad = typeof space === 'number' && space > 0 ? ' '.repeat(Math.min(space, 10)) : '';
  const out = [];
  const seen = new Set();
  const write = (v, indent) => {
    if (v === null || v === undefined || typeof v === 'function' || typeof v === 'symbol') {
      out.push('null');
      return;
    }
    switch (typeof v) {
      case 'string':
        out.push(JSON.stringify(v));
        return;
      case 'number':
        out.push(Number.isFinite(v) ? String(v) : 'null');
        return;
      case 'bigint':
        out.push(v.toString());
        return;
      case 'boolean':
        out.push(v ? 'true' : 'false');
        return;
      default:
        break;
    }
    if (v instanceof LosslessNumber) {
      out.push(v.text);
      return;
    }
    if (seen.has(v)) throw new TypeError('cyclic structure');
    seen.add(v);
    const inner = pad ? indent + pad : '';
    const nl = pad ? '\n' : '';
    if (Array.isArray(v)) {
      if (v.length === 0) {
        out.push('[]');
      } else {
        out.push('[');
        v.forEach((item, idx) => {
          if (idx) out.push(',');
          out.push(nl + inner);
          write(item === undefined ? null : item, inner);
        });
        out.push(nl + indent + ']');
      }
    } else {
      const keys = keysOf(v).filter((k) => v[k] !== undefined && typeof v[k] !== 'function');
      if (keys.length === 0) {
        out.push('{}');
      } else {
        out.push('{');
        keys.forEach((k, idx) => {
          if (idx) out.push(',');
          out.push(nl + inner + JSON.stringify(k) + (pad ? ': ' : ':'));
          write(v[k], inner);
        });
        out.push(nl + indent + '}');
      }
    }
    seen.delete(v);
  };
  write(value, '');
  return out.join('');
}

/** True for number, BigInt and LosslessNumber values. */
export function isNumeric(v) {
  return typeof v === 'number' || typeof v === 'bigint' || v instanceof LosslessNumber;
}

// Exact integer as BigInt when the value is integral, else null.
function asBigInt(v) {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : null;
  if (v instanceof LosslessNumber && v.isInteger) return BigInt(v.text);
  return null;
}

/**
 * Compare two numeric values exactly when both are integers (so 2^53+1 differs
 * from 2^53), as doubles otherwise. Returns -1, 0 or 1.
 */
export function compareNumeric(a, b) {
  const x = asBigInt(a);
  const y = asBigInt(b);
  if (x !== null && y !== null) return x < y ? -1 : x > y ? 1 : 0;
  const p = Number(a);
  const q = Number(b);
  return p < q ? -1 : p > q ? 1 : 0;
}
