/**
 * The execution handshake, the only way this package runs an approved call:
 * the verified decision (approved) -> claim with a fresh nonce (the server re-validates and
 * takes a lease) -> verify the signed grant against the decision and the nonce -> run the
 * tool with exactly the granted params, renewing the lease in the background -> complete
 * with the outcome. A second claim (a restored state, a retried step, another process) is
 * answered "Not run: already executed (...)" instead of a second run; a crash between claim
 * and complete ends `failed / outcome_unknown` on the server when the lease runs out.
 */

import type { ControlPlane } from './client.js';
import { DecisionRefused, parseTimestamp, type Json } from './decisions.js';
import { ApprovalRejected, ControlPlaneError } from './errors.js';
import { newNonce, verifyGrant } from './grant.js';
import type { Resume } from './resume.js';

export interface RunOptions {
  targetHash?: string;
  /** Renew the lease while the tool runs (default true). */
  renew?: boolean;
}

export type RunOutcome<T> =
  | {
      ran: true;
      requestId: string;
      result: T;
      /** False when the server did not take the completion (e.g. 409 lease_expired: the outcome stays unknown). */
      completed: boolean;
      completionError?: ControlPlaneError;
    }
  | {
      ran: false;
      requestId: string;
      /** What the tool answers the model instead: "Not run: already executed (request X, state/resolution)". */
      toolResult: string;
      code: string;
    };

/** What `complete` records as the result: the value if it is JSON, else its text. */
function jsonable(value: unknown): unknown {
  if (value === undefined) return null;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : JSON.parse(text);
  } catch {
    return String(value);
  }
}

// A second claim of a call that went through a claim is refused with one of these.
const CLAIMED_BEFORE = new Set(['already_claimed', 'illegal_transition', 'executed_by_server']);
// Failures that mean "refused before running": a later claim is answered with the refusal, not "already executed".
const REFUSED_BEFORE_RUNNING = new Set([
  'approval_expired',
  'target_changed_reapproval_required',
  'approver_permission_revoked',
  'policy_changed_reapproval_required',
]);
// The fewest milliseconds between two renewals, however short the lease.
const MIN_RENEW_MS = 200;

/** "Not run: ..." when `error` (a refused claim) means the call was claimed before; null otherwise. */
async function notRun(cp: ControlPlane, requestId: string, error: ControlPlaneError): Promise<RunOutcome<never> | null> {
  if (!CLAIMED_BEFORE.has(error.code)) return null;
  let request: Json;
  try {
    request = await cp.get(requestId);
  } catch {
    return null; // the claim's own refusal is then what the caller hears
  }
  const state = String(request['state'] ?? '');
  const resolution = String(request['resolution_code'] || '');
  const ran =
    state === 'executing' || state === 'succeeded' || (state === 'failed' && !REFUSED_BEFORE_RUNNING.has(resolution));
  if (error.code === 'illegal_transition' && !ran) return null;
  const why =
    error.code === 'executed_by_server' ? 'the control plane executes this action type itself' : 'already executed';
  return {
    ran: false,
    requestId,
    code: error.code,
    toolResult: `Not run: ${why} (request ${requestId}, ${state}/${resolution || '-'})`,
  };
}

/** Renew the lease at a third of what is left of it (two renewals may fail before it runs out), until
 * stopped; a refused renewal (lease_expired, invalid_grant) stops it: complete will say so. */
function keepRenewing(cp: ControlPlane, requestId: string, token: string, leaseUntil: unknown): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (until: unknown) => {
    if (stopped || typeof until !== 'string') return;
    let left: number;
    try {
      left = parseTimestamp(until) - Date.now();
    } catch {
      return;
    }
    timer = setTimeout(
      () => {
        cp.renew(requestId, token).then(
          (answer) => schedule(answer['lease_until']),
          (error: unknown) => {
            // A network error is worth another try while the lease lasts; a refusal is final.
            if (!(error instanceof ControlPlaneError) || error.code === 'network_error') schedule(until);
          },
        );
      },
      Math.max(left / 3, MIN_RENEW_MS),
    );
    timer.unref();
  };
  schedule(leaseUntil);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export async function runApproved<T>(
  cp: ControlPlane,
  resume: Resume,
  fn: (params: Json) => T | Promise<T>,
  options: RunOptions = {},
): Promise<RunOutcome<T>> {
  const requestId = resume.requestId;
  // 1. The decision: verified (waitForDecision did it against the call this client made), approved.
  if (resume.decision === null) {
    throw new DecisionRefused(
      `request ${requestId}: the decision was not verified (no public key pinned), so nothing is run`,
    );
  }
  if (resume.call === null) {
    throw new DecisionRefused(
      `request ${requestId}: the decision was not checked against the call this client made ` +
        '(pass `call` to waitForDecision, or wait on what submitAction returned)',
    );
  }
  if (resume.decision['kind'] !== 'action') {
    throw new DecisionRefused(`request ${requestId}: only an action is executed; this decision is a ${resume.kind}`);
  }
  if (!resume.approved || resume.decision['verdict'] !== 'approved') throw new ApprovalRejected(resume);
  // 2. Claim with a nonce made here, now: a grant made for another claim cannot name it.
  const nonce = newNonce();
  let answer: Json;
  try {
    answer = await cp.claim(requestId, { nonce, ...(options.targetHash ? { targetHash: options.targetHash } : {}) });
  } catch (error) {
    const answered = error instanceof ControlPlaneError ? await notRun(cp, requestId, error) : null;
    if (answered !== null) return answered;
    throw error;
  }
  // 3-4. The grant is the server's, for this decision and this claim, and the params are the granted ones.
  verifyGrant(answer, cp.keys, { decision: resume.decision, nonce, requestId });
  const token = String(answer['token']);
  const stop = options.renew === false ? () => undefined : keepRenewing(cp, requestId, token, answer['lease_until']);
  let result: T;
  try {
    result = await fn(answer['params'] as Json);
  } catch (error) {
    stop();
    await cp.complete(requestId, token, { succeeded: false, error: String(error) }).catch(() => undefined);
    throw error;
  }
  stop();
  try {
    await cp.complete(requestId, token, { succeeded: true, result: jsonable(result) });
  } catch (error) {
    if (error instanceof ControlPlaneError) return { ran: true, requestId, result, completed: false, completionError: error };
    throw error;
  }
  return { ran: true, requestId, result, completed: true };
}
