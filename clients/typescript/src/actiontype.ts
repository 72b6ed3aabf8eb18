/**
 * The action type as the server stores it (Python's `normalize_action_type`): Unicode NFKC,
 * surrounding characters that are not letters or digits (by Unicode category) removed, then
 * case-folded, so a client compares the signed action type with the one it sent without
 * trusting any answer for it.
 *
 * JavaScript has no `casefold`. Per code point, `toUpperCase().toLowerCase()` gives Python's
 * full case folding for every assigned code point but three groups (checked exhaustively
 * against CPython 3.11, Unicode 14, on Node 20): dotless ı folds to itself, capital sharp
 * ẞ folds to "ss", and Cherokee folds to its capital letters (the only script whose fold
 * is upper case). Those are handled first. Code points Unicode assigned after the version
 * the server's Python knows may still differ; the server accepts ASCII action types only,
 * so no decision ever names one.
 */

const LETTER_OR_DIGIT = /^[\p{L}\p{N}]$/u;

function isCherokee(cp: number): boolean {
  return (cp >= 0x13a0 && cp <= 0x13f5) || (cp >= 0x13f8 && cp <= 0x13fd) || (cp >= 0xab70 && cp <= 0xabbf);
}

/** Python's `str.casefold`, one code point at a time (it is context-free, like Python's). */
export function caseFold(text: string): string {
  let out = '';
  for (const char of text) {
    const cp = char.codePointAt(0)!;
    if (cp === 0x131) out += char;
    else if (cp === 0x1e9e) out += 'ss';
    else if (isCherokee(cp)) out += char.toUpperCase();
    else out += char.toUpperCase().toLowerCase();
  }
  return out;
}

export function normalizeActionType(raw: string): string {
  const chars = Array.from(raw.normalize('NFKC'));
  let start = 0;
  let end = chars.length;
  while (start < end && !LETTER_OR_DIGIT.test(chars[start]!)) start++;
  while (end > start && !LETTER_OR_DIGIT.test(chars[end - 1]!)) end--;
  return caseFold(chars.slice(start, end).join(''));
}
