/**
 * The client: a connection to the control plane as one agent (its bearer token).
 *
 * Configuration, as the Python client reads it: `url` / `$CONTROLPLANE_URL`, `token` /
 * `$CONTROLPLANE_TOKEN`, the server's pinned keys `publicKeys` / `$CONTROLPLANE_PUBLIC_KEYS`
 * (`ed25519:...`, comma- or space-separated; a key that does not parse throws at construction),
 * and this agent's name `agent` / `$CONTROLPLANE_AGENT` (else the name in the first decision
 * that verified for a call this client made).
 */

import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';

import { SubmittedCall, DecisionRefused, verifyDecision, type Json } from './decisions.js';
import { keysFromEnvironment, trustedKeys, type TrustedKeys } from './ed25519.js';
import { ApprovalTimeout } from './errors.js';
import { Transport } from './http.js';
import { Resume, type Submitted } from './resume.js';
import { runApproved, type RunOptions, type RunOutcome } from './handshake.js';
import { runTool, type ToolCall } from './tools.js';

export const PUBLIC_KEYS_ENV = 'CONTROLPLANE_PUBLIC_KEYS';
export const AGENT_ENV = 'CONTROLPLANE_AGENT';

export interface ControlPlaneOptions {
  url?: string;
  token?: string;
  /** `ed25519:...` texts, as `manage.py audit_public_key` prints them. */
  publicKeys?: Iterable<string>;
  agent?: string;
  /** Seconds each long-poll asks the server to hold (default 25). */
  pollWait?: number;
  /** Network errors retried (same idempotency key) before `network_error` (default 5). */
  retries?: number;
  retryBackoff?: number;
  /** Seconds per request (default 10). */
  timeout?: number;
  fetch?: typeof fetch;
  /** Where the defaults are read from (default `process.env`). */
  env?: Record<string, string | undefined>;
}

/** Correlation fields every submission may carry. */
export interface Correlation {
  idempotencyKey?: string;
  runId?: string;
  threadId?: string;
  resourceId?: string;
  toolCallId?: string;
  batchId?: string;
  callbackUrl?: string;
  reason?: string;
  context?: Json;
}

export interface ActionInput extends Correlation {
  actionType: string;
  target?: Json;
  params?: Json;
  declared?: Json;
  allowedDecisions?: string[];
}

export interface PlanInput extends Correlation {
  path: string;
  /** The plan's text; read from `path` when not given. */
  plan?: string;
  title?: string;
}

export interface SuspensionInput extends Correlation {
  title: string;
  summary?: string;
  workflowId?: string;
  stepId?: string;
  actionType?: string;
  suspendPayload: Json;
  resumeSchema: Json;
}

export interface WaitOptions {
  /** Seconds; ApprovalTimeout after it (default: wait as long as it takes). */
  timeout?: number;
  call?: SubmittedCall;
  toolCallId?: string;
  actionType?: string;
  suspension?: boolean;
}

const SNAKE: Record<string, string> = {
  runId: 'run_id',
  threadId: 'thread_id',
  resourceId: 'resource_id',
  toolCallId: 'tool_call_id',
  batchId: 'batch_id',
  callbackUrl: 'callback_url',
  reason: 'reason',
  context: 'context',
  declared: 'declared',
  allowedDecisions: 'allowed_decisions',
  summary: 'summary',
  workflowId: 'workflow_id',
  stepId: 'step_id',
  actionType: 'action_type',
  title: 'title',
};

/** The submission body: the named fields in snake case, empty ones (undefined, null, "", {}) left out. */
function fields(input: object, names: string[]): Json {
  const body: Json = {};
  for (const name of names) {
    const value = (input as Record<string, unknown>)[name];
    const empty =
      value === undefined ||
      value === null ||
      value === '' ||
      (typeof value === 'object' && !Array.isArray(value) && Object.keys(value as object).length === 0);
    if (!empty) body[SNAKE[name] ?? name] = value;
  }
  return body;
}

const CORRELATION = ['reason', 'context', 'runId', 'threadId', 'resourceId', 'toolCallId', 'batchId', 'callbackUrl'];

/** The request id a submission answer names, as a UUID's text (it only steers the next URL; the
 * signed decision must still name the call this client made). */
export function submittedId(answer: Json): string {
  const id = String(answer['id'] ?? '').toLowerCase();
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
    throw new DecisionRefused(`the submission answer names no request id (${JSON.stringify(answer['id'])})`);
  }
  return id;
}

export const newIdempotencyKey = (): string => `cpc-${randomUUID()}`;

let warnedUnverified = false;

export class ControlPlane {
  readonly url: string;
  readonly keys: TrustedKeys;
  /** The agent decisions must name: configured, else the first verified decision's. */
  agent: string | null;
  readonly pollWait: number;
  readonly #http: Transport;

  constructor(options: ControlPlaneOptions = {}) {
    const env = options.env ?? process.env;
    const url = options.url ?? env['CONTROLPLANE_URL'];
    const token = options.token ?? env['CONTROLPLANE_TOKEN'];
    if (!url || !token) throw new Error('give url and token, or set CONTROLPLANE_URL and CONTROLPLANE_TOKEN');
    this.keys = trustedKeys(options.publicKeys ?? keysFromEnvironment(env[PUBLIC_KEYS_ENV]));
    this.agent = options.agent ?? (env[AGENT_ENV] || null);
    this.pollWait = options.pollWait ?? 25;
    this.#http = new Transport({
      url,
      token,
      timeout: options.timeout ?? 10,
      retries: options.retries ?? 5,
      retryBackoff: options.retryBackoff ?? 0.5,
      fetch: options.fetch ?? globalThis.fetch,
    });
    this.url = this.#http.url;
  }

  /** The raw API (for what the helpers below do not cover). */
  call<T = Json>(method: string, path: string, options?: Parameters<Transport['call']>[2]): Promise<T> {
    return this.#http.call<T>(method, path, options);
  }

  async #submit(path: string, body: Json, idempotencyKey: string): Promise<Json> {
    return this.#http.call('POST', path, { body, headers: { 'Idempotency-Key': idempotencyKey } });
  }

  /** Submit a tool call. The answer is the request as the API shows it; `call` is what the decision must name. */
  async submitAction(input: ActionInput): Promise<Submitted> {
    const idempotencyKey = input.idempotencyKey ?? newIdempotencyKey();
    const params = input.params ?? {};
    const body = {
      action_type: input.actionType,
      target: input.target ?? {},
      params,
      ...fields(input, [...CORRELATION, 'declared', 'allowedDecisions']),
    };
    const request = await this.#submit('/api/v1/actions/', body, idempotencyKey);
    const call = SubmittedCall.action(input.actionType, params, { idempotencyKey, toolCallId: input.toolCallId });
    return { id: submittedId(request), request, call };
  }

  /** Submit a plan (read from `path` unless `plan` is given). */
  async submitPlan(input: PlanInput): Promise<Submitted> {
    const idempotencyKey = input.idempotencyKey ?? newIdempotencyKey();
    const plan = input.plan ?? (await readFile(input.path, 'utf8'));
    const body = { path: input.path, plan, ...fields(input, ['title', ...CORRELATION]) };
    const request = await this.#submit('/api/v1/plans/', body, idempotencyKey);
    const call = SubmittedCall.plan(input.path, plan, { idempotencyKey, toolCallId: input.toolCallId });
    return { id: submittedId(request), request, call };
  }

  /** Submit a workflow step's suspension; its resume gives the reviewers' answer exactly as validated. */
  async submitSuspension(input: SuspensionInput): Promise<Submitted> {
    const idempotencyKey = input.idempotencyKey ?? newIdempotencyKey();
    const body = {
      title: input.title,
      suspend_payload: input.suspendPayload,
      resume_schema: input.resumeSchema,
      ...fields(input, ['summary', 'workflowId', 'stepId', 'actionType', ...CORRELATION]),
    };
    const request = await this.#submit('/api/v1/suspensions/', body, idempotencyKey);
    const actionType = input.actionType || `${input.workflowId ?? ''}.${input.stepId ?? ''}`;
    const call = SubmittedCall.suspension(actionType, input.suspendPayload, {
      idempotencyKey,
      toolCallId: input.toolCallId,
    });
    return { id: submittedId(request), request, call };
  }

  /** One long-poll: the resume payload, `decided` false if nothing was decided within `wait` seconds. */
  resume(requestId: string, wait = 0): Promise<Json> {
    const id = encodeURIComponent(requestId);
    return this.#http.call('GET', `/api/v1/requests/${id}/resume/?wait=${wait}`, { hold: wait });
  }

  get(requestId: string): Promise<Json> {
    return this.#http.call('GET', `/api/v1/requests/${encodeURIComponent(requestId)}/`);
  }

  cancel(requestId: string, reason = ''): Promise<Json> {
    return this.#http.call('POST', `/api/v1/requests/${encodeURIComponent(requestId)}/cancel/`, { body: { reason } });
  }

  /**
   * Long-poll until the request is decided; the decision is verified against the call this
   * client made (`submitted.call`, or `options.call`) before it is returned: DecisionRefused
   * otherwise. With no key pinned nothing can be checked: a warning says so, once.
   */
  async waitForDecision(submitted: Submitted | string, options: WaitOptions = {}): Promise<Resume> {
    const requestId = typeof submitted === 'string' ? submitted : submitted.id;
    const given = options.call ?? (typeof submitted === 'string' ? undefined : submitted.call);
    const deadline = options.timeout === undefined ? null : Date.now() + options.timeout * 1000;
    for (;;) {
      const remaining = deadline === null ? this.pollWait : Math.min(this.pollWait, (deadline - Date.now()) / 1000);
      // Fractions are fine (the server reads a float): near the deadline the last poll waits out the rest.
      const payload = await this.resume(requestId, Math.max(Math.round(remaining * 1000) / 1000, 0));
      if (payload['decided']) return this.checkedResume(payload, requestId, given, options);
      if (deadline !== null && Date.now() >= deadline) {
        throw new ApprovalTimeout('timeout', `No decision on ${requestId} within ${options.timeout} s.`);
      }
    }
  }

  /** A decided payload as a Resume, its decision_signature checked first when keys are pinned. */
  checkedResume(payload: Json, requestId: string, given?: SubmittedCall, options: WaitOptions = {}): Resume {
    if (this.keys.size === 0) {
      if (!warnedUnverified) {
        warnedUnverified = true;
        process.emitWarning(
          `hitl-controlplane: no public key configured (publicKeys or $${PUBLIC_KEYS_ENV}): decisions are NOT ` +
            'verified, so a forged or replayed approval would be obeyed',
          { code: 'HITL_CONTROLPLANE_UNVERIFIED' },
        );
      }
      return new Resume(payload, null, given ?? null);
    }
    const call = given ? SubmittedCall.withAgent(given, this.agent) : undefined;
    const decision = verifyDecision(payload, this.keys, {
      requestId,
      ...(call ? { call } : {}),
      ...(options.toolCallId !== undefined ? { toolCallId: options.toolCallId } : {}),
      ...(options.actionType !== undefined ? { actionType: options.actionType } : {}),
      ...(options.suspension !== undefined ? { suspension: options.suspension } : {}),
    });
    if (call && this.agent === null) this.agent = String((decision['agent'] as Json)['name']);
    return new Resume(payload, decision, call ?? null);
  }

  /** Submit a tool call and wait for its verified decision. */
  async requestApproval(input: ActionInput, options: WaitOptions = {}): Promise<Resume> {
    return this.waitForDecision(await this.submitAction(input), options);
  }

  /** Claim an approved execution with this process's fresh `nonce`: the grant, signed. */
  claim(requestId: string, options: { nonce: string; targetHash?: string }): Promise<Json> {
    const body: Json = { nonce: options.nonce, ...(options.targetHash ? { target_hash: options.targetHash } : {}) };
    // Never retried: a second claim is refused as already claimed, which is the safe outcome anyway.
    return this.#http.call('POST', `/api/v1/requests/${encodeURIComponent(requestId)}/claim/`, { body, retry: false });
  }

  /** Extend the claimed execution's lease: `{request_id, lease_until}` (409 lease_expired once it ran out). */
  renew(requestId: string, token: string): Promise<Json> {
    return this.#http.call('POST', `/api/v1/requests/${encodeURIComponent(requestId)}/renew/`, { body: { token } });
  }

  /** Report the claimed execution's outcome. */
  complete(
    requestId: string,
    token: string,
    outcome: { succeeded: boolean; result?: unknown; error?: string },
  ): Promise<Json> {
    const body = { token, succeeded: outcome.succeeded, result: outcome.result ?? null, error: outcome.error ?? '' };
    return this.#http.call('POST', `/api/v1/requests/${encodeURIComponent(requestId)}/complete/`, { body });
  }

  /** The execution handshake around `fn` (see handshake.ts): at most once, with exactly the granted params. */
  runApproved<T>(resume: Resume, fn: (params: Json) => T | Promise<T>, options: RunOptions = {}): Promise<RunOutcome<T>> {
    return runApproved(this, resume, fn, options);
  }

  /** The handshake inside a tool body, keyed by the call id (see tools.ts): `fn`'s result, or the text the model reads. */
  runTool<T>(call: ToolCall, fn: (params: Json) => T | Promise<T>, options: { timeout?: number } = {}): Promise<T | string> {
    return runTool(this, call, fn, options);
  }
}
