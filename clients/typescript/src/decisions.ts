/**
 * Decision signatures (document v2): a resume is acted on only when the server's signature
 * binds it to exactly the call this client made. The same checks, in the same order, as the
 * Python client's `verify_decision` (clients/python/hitl_controlplane/decisions.py, whose
 * docstring is the normative description; docs/agents.md restates it).
 */

import { createHash } from 'node:crypto';

import { normalizeActionType } from './actiontype.js';
import { asSent, canonicalBytes, valueSha256 } from './canonical.js';
import { verifyBytes, type TrustedKeys } from './ed25519.js';

export const ALGORITHM = 'ed25519';
export const DOCUMENT_TYPE = 'hitl-controlplane/decision';
export const VERSION = 2;
/** Domain separation: an audit-row signature or an execution grant never passes as a decision. */
export const CONTEXT = Buffer.from('hitl-controlplane decision v2\0', 'utf8');
export const PLAN_ACTION_TYPE = 'submit_plan';

export type Kind = 'action' | 'plan' | 'suspension';
export type Json = Record<string, unknown>;

/** The resume's signature does not bind it to the call the client is about to run; nothing ran. */
export class DecisionRefused extends Error {
  override name = 'DecisionRefused';
}

/** The call a client made, as it knows it without trusting any answer from the network. */
export interface SubmittedCall {
  readonly kind: Kind;
  /** Normalized (`normalizeActionType`). */
  readonly actionType: string;
  readonly submittedSha256: string;
  readonly idempotencyKey: string | null;
  /** "" when none was given. */
  readonly toolCallId: string;
  /** The agent's name; null leaves it unchecked. */
  readonly agent: string | null;
}

export interface CallIds {
  idempotencyKey: string | null | undefined;
  toolCallId?: string | null | undefined;
  agent?: string | null | undefined;
}

function key(idempotencyKey: string | null | undefined): string | null {
  const trimmed = idempotencyKey?.trim();
  return trimmed ? trimmed : null;
}

function ids(kind: Kind, actionType: string, submitted: unknown, given: CallIds): SubmittedCall {
  return {
    kind,
    actionType,
    submittedSha256: submittedSha256(submitted),
    idempotencyKey: key(given.idempotencyKey),
    toolCallId: (given.toolCallId ?? '').trim(),
    agent: given.agent ?? null,
  };
}

/** The digest of what was submitted, computed on the JSON as sent (see `asSent`). */
export function submittedSha256(submitted: unknown): string {
  const digest = valueSha256(asSent(submitted));
  if (digest === null) throw new TypeError('nothing was submitted');
  return digest;
}

export const SubmittedCall = {
  /** An action: its params (`{}` when none). */
  action(actionType: string, params: unknown, given: CallIds): SubmittedCall {
    return ids('action', normalizeActionType(actionType), params ?? {}, given);
  },
  /** A plan: `{path, plan}` (the path trimmed as the API stores it; the title is only a label). */
  plan(path: string, plan: string, given: CallIds): SubmittedCall {
    return ids('plan', PLAN_ACTION_TYPE, { path: path.trim(), plan }, given);
  },
  /** A suspension: its suspend payload; `actionType` is the one given, else `<workflowId>.<stepId>`. */
  suspension(actionType: string, suspendPayload: unknown, given: CallIds): SubmittedCall {
    return ids('suspension', normalizeActionType(actionType), suspendPayload ?? {}, given);
  },
  withAgent(call: SubmittedCall, agent: string | null): SubmittedCall {
    return agent === null ? call : { ...call, agent };
  },
};

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What the agent acts on when it goes ahead, from the resume data; null otherwise. */
export function signedPayload(resumeData: Json): unknown {
  if (resumeData['action'] === 'responded') return { message: resumeData['message'] ?? null };
  if (resumeData['action'] !== 'approved') return null;
  if ('params' in resumeData) return resumeData['params'];
  if ('plan' in resumeData) {
    return { path: resumeData['path'] ?? null, title: resumeData['title'] ?? null, plan: resumeData['plan'] ?? null };
  }
  return null;
}

function verdictAndPayload(kind: unknown, resumeData: unknown): [unknown, string | null] {
  if (kind === 'suspension') {
    const answer = resumeData ?? null;
    return [answer === null ? 'rejected' : 'answered', valueSha256(answer)];
  }
  if (!isObject(resumeData)) throw new TypeError("an action's or plan's resume data is an object");
  return [resumeData['action'], valueSha256(signedPayload(resumeData))];
}

/** SHA-256 of the UTF-8 of the `tool_result` text the model reads; null when there is none. */
export function toolResultSha256(text: unknown): string | null {
  if (typeof text !== 'string') return null;
  if (/[\uD800-\uDFFF]/u.test(text)) throw new TypeError('the tool result is not valid Unicode');
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The bytes a decision's signature is over: the context string, then the canonical document. */
export function signedMessage(document: unknown): Buffer {
  return Buffer.concat([CONTEXT, canonicalBytes(document)]);
}

const show = (value: unknown): string => (value === undefined ? 'null' : JSON.stringify(value));

/** The signature block's document once its signature held under a pinned key; DecisionRefused otherwise. */
export function verifiedDocument(
  block: unknown,
  keys: TrustedKeys,
  context: Buffer,
  what: string,
  named: string,
): Json {
  if (!isObject(block)) {
    throw new DecisionRefused(
      `request ${named}: the answer carries no ${what} (an older server, or someone between the server and this client removed it)`,
    );
  }
  const { signed, signature } = block;
  if (block['algorithm'] !== ALGORITHM || !isObject(signed) || typeof signature !== 'string') {
    throw new DecisionRefused(`request ${named}: the ${what} is malformed`);
  }
  const key = keys.get(String(block['key_id'] ?? ''));
  if (key === undefined) {
    throw new DecisionRefused(
      `request ${named}: the ${what} is signed by key ${show(block['key_id'])}, which this client does not trust`,
    );
  }
  let message: Buffer;
  try {
    message = Buffer.concat([context, canonicalBytes(signed)]);
  } catch {
    throw new DecisionRefused(`request ${named}: the document of the ${what} is not canonical`);
  }
  if (!verifyBytes(key, message, signature)) {
    throw new DecisionRefused(`request ${named}: the ${what} does not match (forged or altered)`);
  }
  return signed;
}

export interface VerifyDecisionOptions {
  requestId?: string;
  call?: SubmittedCall;
  toolCallId?: string;
  actionType?: string;
  now?: Date;
  /** Without `call`: the payload is a suspension's (otherwise an action's or a plan's). */
  suspension?: boolean;
}

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

/** Milliseconds since the epoch of a `format_timestamp` text (UTC, microseconds). */
export function parseTimestamp(text: string): number {
  const m = TIMESTAMP.exec(text);
  if (m === null) throw new TypeError(`not a UTC timestamp with microseconds: ${text}`);
  const [, y, mo, d, h, mi, s, us] = m.map(Number) as [number, number, number, number, number, number, number, number];
  return Date.UTC(y, mo - 1, d, h, mi, s) + us / 1000;
}

/**
 * Check that a decided resume payload is the server's v2 decision for exactly this call, and
 * return the signed document. `call`: the call this client submitted, as it knows it itself;
 * the document must name its agent (when known), kind, action type, submitted digest,
 * idempotency key and tool-call id. The verdict and payload digest are recomputed from the
 * resume data about to be acted on, never taken from the document; an approval past its
 * `execute_by` (by this machine's clock) is refused. Throws DecisionRefused naming the first mismatch.
 */
export function verifyDecision(payload: Json, keys: TrustedKeys, options: VerifyDecisionOptions = {}): Json {
  const { requestId, call, toolCallId, actionType } = options;
  const named = String(requestId ?? payload['request_id']);
  const signed = verifiedDocument(payload['decision_signature'], keys, CONTEXT, 'decision_signature', named);
  if (signed['type'] !== DOCUMENT_TYPE || signed['v'] !== VERSION) {
    throw new DecisionRefused(
      `request ${named}: the signed document is ${show(signed['type'])} v${show(signed['v'])}, not a ${DOCUMENT_TYPE} v${VERSION}`,
    );
  }
  const kind = signed['kind'];
  const wanted: Kind[] = call ? [call.kind] : options.suspension ? ['suspension'] : ['action', 'plan'];
  if (!wanted.includes(kind as Kind)) {
    throw new DecisionRefused(
      `request ${named}: the signed decision's kind is ${show(kind)}, not ${wanted.join(' or ')} (replayed from another kind of call)`,
    );
  }
  let verdict: unknown;
  let digest: string | null;
  try {
    [verdict, digest] = verdictAndPayload(kind, payload['resume_data']);
  } catch {
    throw new DecisionRefused(`request ${named}: the resume carries no resume data it can act on`);
  }
  let toolResult: string | null;
  try {
    toolResult = toolResultSha256(payload['tool_result']);
  } catch {
    throw new DecisionRefused(`request ${named}: the tool result is not valid Unicode`);
  }
  const expected: [string, unknown][] = [
    ['verdict', verdict],
    ['payload_sha256', digest],
    ['tool_result_sha256', toolResult],
  ];
  if (requestId !== undefined) expected.push(['request_id', String(requestId)]);
  if (toolCallId !== undefined) expected.push(['tool_call_id', toolCallId.trim()]);
  if (actionType !== undefined) expected.push(['action_type', normalizeActionType(actionType)]);
  if (call) {
    expected.push(
      ['action_type', call.actionType],
      ['submitted_sha256', call.submittedSha256],
      ['tool_call_id', call.toolCallId],
      ['idempotency_key', call.idempotencyKey],
    );
  }
  for (const [name, value] of expected) {
    if ((signed[name] ?? null) !== value) {
      throw new DecisionRefused(
        `request ${named}: the signed decision's ${name} is ${show(signed[name])}, not ${show(value)} ` +
          '(not the call this client made: replayed from another call, or altered)',
      );
    }
  }
  const agent = signed['agent'];
  if (!isObject(agent) || typeof agent['name'] !== 'string') {
    throw new DecisionRefused(`request ${named}: the signed decision names no agent`);
  }
  if (call && call.agent !== null && agent['name'] !== call.agent) {
    throw new DecisionRefused(
      `request ${named}: the signed decision is agent ${show(agent['name'])}'s, not ${show(call.agent)}'s (another agent's approval)`,
    );
  }
  const answered = payload['request_id'] === undefined ? signed['request_id'] : payload['request_id'];
  if (String(answered) !== String(signed['request_id'])) {
    throw new DecisionRefused(
      `request ${named}: the resume names request ${show(payload['request_id'])}, the signed decision ${show(signed['request_id'])}`,
    );
  }
  const deadline = signed['execute_by'];
  if (signed['verdict'] === 'approved' && typeof deadline === 'string') {
    let lapsesAt: number;
    try {
      lapsesAt = parseTimestamp(deadline);
    } catch {
      throw new DecisionRefused(`request ${named}: the signed execute_by ${show(deadline)} is not a timestamp`);
    }
    if (lapsesAt <= (options.now ?? new Date()).getTime()) {
      throw new DecisionRefused(
        `request ${named}: the approval had to be executed by ${deadline}; it has lapsed (a stale approval, replayed?)`,
      );
    }
  }
  return { ...signed };
}
