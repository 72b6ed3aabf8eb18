/**
 * The execution grant (v1): the server's signed answer to a claim, binding the request, its
 * revision, the params digest, the agent, the action type, the execution key, this process's
 * fresh nonce and the attempt. Its own document type and context string, so a decision can
 * never stand in for a grant nor a grant for a decision. The spec is the integrator's
 * (grant v1); the checks below follow its order, and any failure is DecisionRefused: nothing runs.
 */

import { randomBytes } from 'node:crypto';

import { canonicalBytes, valueSha256 } from './canonical.js';
import { DecisionRefused, verifiedDocument, type Json } from './decisions.js';
import type { TrustedKeys } from './ed25519.js';

export const GRANT_TYPE = 'hitl-controlplane/grant';
export const GRANT_VERSION = 1;
export const GRANT_CONTEXT = Buffer.from('hitl-controlplane grant v1\0', 'utf8');

/** A fresh claim nonce: 32 random bytes, base64url without padding (43 characters). */
export function newNonce(): string {
  return randomBytes(32).toString('base64url');
}

/** The bytes a grant's signature is over: the grant context, then the canonical document. */
export function grantMessage(document: unknown): Buffer {
  return Buffer.concat([GRANT_CONTEXT, canonicalBytes(document)]);
}

function sameAgent(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return false;
  try {
    return canonicalBytes(a).equals(canonicalBytes(b));
  } catch {
    return false;
  }
}

const show = (value: unknown): string => (value === undefined ? 'null' : JSON.stringify(value));

/**
 * Check a claim answer's `grant_signature` against the verified decision and the nonce this
 * process just sent, and that the params the tool will receive are the granted ones. Returns
 * the signed grant document; throws DecisionRefused naming the first mismatch.
 *
 * `decision`: the signed decision document `verifyDecision` returned (already checked to be
 * the call this client made); `requestId`: the request this client claimed.
 */
export function verifyGrant(
  answer: Json,
  keys: TrustedKeys,
  options: { decision: Json; nonce: string; requestId?: string },
): Json {
  const { decision, nonce } = options;
  const named = String(options.requestId ?? decision['request_id']);
  if (decision['verdict'] !== 'approved') {
    throw new DecisionRefused(`request ${named}: the decision is ${show(decision['verdict'])}, not approved`);
  }
  const grant = verifiedDocument(answer['grant_signature'], keys, GRANT_CONTEXT, 'grant_signature', named);
  if (grant['type'] !== GRANT_TYPE || grant['v'] !== GRANT_VERSION) {
    throw new DecisionRefused(
      `request ${named}: the signed grant is ${show(grant['type'])} v${show(grant['v'])}, not a ${GRANT_TYPE} v${GRANT_VERSION}`,
    );
  }
  const expected: [string, unknown, string][] = [
    ['request_id', decision['request_id'], "the decision's"],
    ['revision', decision['revision'], "the decision's"],
    ['params_sha256', decision['payload_sha256'], 'the approved params digest'],
    ['action_type', decision['action_type'], "the decision's"],
    ['nonce', nonce, 'the nonce this process sent (a grant replayed from another claim)'],
  ];
  if (options.requestId !== undefined) expected.push(['request_id', options.requestId, 'the request claimed']);
  for (const [name, value, what] of expected) {
    if ((grant[name] ?? null) !== (value ?? null)) {
      throw new DecisionRefused(
        `request ${named}: the signed grant's ${name} is ${show(grant[name])}, not ${show(value)} (${what})`,
      );
    }
  }
  if (!sameAgent(grant['agent'], decision['agent'])) {
    throw new DecisionRefused(
      `request ${named}: the signed grant is for agent ${show(grant['agent'])}, the decision for ${show(decision['agent'])}`,
    );
  }
  let digest: string | null;
  try {
    digest = valueSha256(answer['params']);
  } catch {
    digest = null;
  }
  if (digest === null || digest !== grant['params_sha256']) {
    throw new DecisionRefused(`request ${named}: the params to run are not the granted ones (altered in transit)`);
  }
  return { ...grant };
}
