/**
 * The two canonical JSON forms the server signs over, byte for byte as the Python client
 * computes them (clients/python/hitl_controlplane/canonical.py).
 *
 * - `canonicalBytes`: the audit chain's form, used for signed documents (decisions, grants):
 *   keys sorted by code point, `,`/`:` separators, UTF-8, no floats. A number that is not a
 *   safe integer is refused, as Python refuses floats: its bytes would depend on a float's
 *   printing (and an integer past 2^53 has already lost digits in `JSON.parse`).
 * - `valueBytes`: RFC 8785 (JCS) for any JSON value, floats included (keys sorted by UTF-16
 *   code units, numbers as ECMAScript prints them); `valueSha256` is the digest the server
 *   signs for submitted and approved params.
 *
 * Both refuse strings holding lone surrogates (Python's UTF-8 encoder raises on them) and
 * anything that is not plain JSON (undefined, functions, bigints, dates, class instances).
 */

import { createHash } from 'node:crypto';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

// With the `u` flag a surrogate pair is one code point, so this matches only lone halves.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function checkedString(text: string, path: string): string {
  if (LONE_SURROGATE.test(text)) {
    throw new TypeError(`strings must be valid Unicode (a lone surrogate at ${path})`);
  }
  // JSON.stringify escapes exactly what Python's json.dumps(ensure_ascii=False) escapes:
  // `"`, `\`, \b \f \n \r \t, the other controls as \u00xx (lower-case hex); nothing else.
  return JSON.stringify(text);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'object' && value !== null) return value.constructor?.name ?? 'object';
  return typeof value;
}

/** Code point order (Python's str order), not UTF-16 code unit order: they differ past U+FFFF. */
function byCodePoint(a: string, b: string): number {
  const left = Array.from(a);
  const right = Array.from(b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const x = left[i]!.codePointAt(0)!;
    const y = right[i]!.codePointAt(0)!;
    if (x !== y) return x - y;
  }
  return left.length - right.length;
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

type NumberWriter = (value: number, path: string) => string;

function writeValue(
  value: unknown,
  path: string,
  out: string[],
  number: NumberWriter,
  order: (a: string, b: string) => number,
): void {
  if (value === null) {
    out.push('null');
  } else if (typeof value === 'boolean') {
    out.push(value ? 'true' : 'false');
  } else if (typeof value === 'number') {
    out.push(number(value, path));
  } else if (typeof value === 'string') {
    out.push(checkedString(value, path));
  } else if (Array.isArray(value)) {
    out.push('[');
    for (let index = 0; index < value.length; index++) {
      if (index) out.push(',');
      writeValue(value[index], `${path}[${index}]`, out, number, order);
    }
    out.push(']');
  } else if (isPlainObject(value)) {
    out.push('{');
    const keys = Object.keys(value).sort(order);
    keys.forEach((key, index) => {
      if (index) out.push(',');
      out.push(checkedString(key, `${path}.${key}`), ':');
      writeValue(value[key], `${path}.${key}`, out, number, order);
    });
    out.push('}');
  } else {
    throw new TypeError(`${describe(value)} is not canonical JSON (at ${path}); convert it to a string first`);
  }
}

function integerOnly(value: number, path: string): string {
  if (!Number.isSafeInteger(value)) {
    throw new TypeError(`only integers are canonical (at ${path}: ${value}); pass decimals as strings`);
  }
  return String(value);
}

function ecmascriptNumber(value: number, path: string): string {
  if (!Number.isFinite(value)) throw new RangeError(`NaN and infinities are not JSON (at ${path})`);
  return String(value); // Number::toString, which RFC 8785 prescribes (-0 prints as 0)
}

/** The audit chain's canonical UTF-8 JSON of `value` (signed documents). Throws TypeError otherwise. */
export function canonicalBytes(value: unknown): Buffer {
  const out: string[] = [];
  writeValue(value, '$', out, integerOnly, byCodePoint);
  return Buffer.from(out.join(''), 'utf8');
}

/** The RFC 8785 (JCS) bytes of a JSON value (floats allowed). Throws TypeError/RangeError for non-JSON. */
export function valueBytes(value: unknown): Buffer {
  const out: string[] = [];
  writeValue(value, '$', out, ecmascriptNumber, byCodeUnit);
  return Buffer.from(out.join(''), 'utf8');
}

/** SHA-256 hex of `valueBytes(value)`; null for null or undefined (nothing to act on). */
export function valueSha256(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return createHash('sha256').update(valueBytes(value)).digest('hex');
}

/**
 * `value` as the server parses it from the JSON this client sends (`JSON.stringify` drops
 * undefined members and calls `toJSON`), so a digest of it is a digest of what was sent.
 * NaN and infinities are refused rather than silently sent as null.
 */
export function asSent(value: unknown): JsonValue {
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item === 'number' && !Number.isFinite(item)) throw new RangeError('NaN and infinities are not JSON');
    return item;
  });
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}
