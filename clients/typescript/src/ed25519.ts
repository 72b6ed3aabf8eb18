/**
 * Pinned Ed25519 server keys, as the Python client reads them (hitl_controlplane/ed25519.py):
 * a key is written `ed25519:<base64url of the 32 raw bytes>` (what `manage.py audit_public_key`
 * prints), and its key id is the first 16 hex digits of the SHA-256 of those bytes.
 * Verification is node:crypto's own Ed25519; nothing here implements any cryptography.
 */

import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';

export const PREFIX = 'ed25519:';

/** The keys a client trusts, by key id. */
export type TrustedKeys = ReadonlyMap<string, KeyObject>;

interface ParsedKey {
  keyId: string;
  key: KeyObject;
}

// Python's urlsafe_b64decode also takes the standard alphabet and padding; so does this.
const BASE64 = /^[A-Za-z0-9_+/-]*={0,2}$/;

function rawKeyBytes(text: string): Buffer {
  const trimmed = text.trim();
  if (!trimmed.startsWith(PREFIX)) throw new Error(`a public key starts with '${PREFIX}'`);
  const encoded = trimmed.slice(PREFIX.length);
  if (!BASE64.test(encoded)) throw new Error('the public key is not base64url');
  const raw = Buffer.from(encoded.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''), 'base64url');
  if (raw.length !== 32) throw new Error('an Ed25519 public key is 32 bytes');
  return raw;
}

/** `ed25519:<base64url raw key>` as a key and its id. Throws Error for anything else. */
export function parsePublicKey(text: string): ParsedKey {
  const raw = rawKeyBytes(text);
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  return { keyId: keyIdOf(raw), key };
}

/** The key id of raw public key bytes: 16 hex digits of their SHA-256. */
export function keyIdOf(raw: Uint8Array): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 16);
}

/**
 * `{keyId: key}` from `ed25519:...` texts. Throws for a text that does not parse: a typo
 * must never silently turn checking off.
 */
export function trustedKeys(texts: Iterable<string>): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  for (const text of texts) {
    const { keyId, key } = parsePublicKey(text);
    keys.set(keyId, key);
  }
  return keys;
}

/** The keys named by `$CONTROLPLANE_PUBLIC_KEYS` (comma- or space-separated), as the Python client splits it. */
export function keysFromEnvironment(value: string | undefined): string[] {
  return (value ?? '').replace(/,/g, ' ').split(/\s+/).filter(Boolean);
}

/** True when `signature` (base64url) is `key`'s Ed25519 signature over `message`. */
export function verifyBytes(key: KeyObject, message: Uint8Array, signature: string): boolean {
  if (!BASE64.test(signature)) return false;
  const raw = Buffer.from(signature.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''), 'base64url');
  if (raw.length !== 64) return false;
  try {
    return verify(null, message, key, raw);
  } catch {
    return false;
  }
}
