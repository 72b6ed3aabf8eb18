/**
 * The handshake inside a tool body, for frameworks that run the tool themselves once a host
 * approved it (Mastra's `approveToolCall`, the AI SDK's approval response, the OpenAI Agents
 * SDK's `state.approve`): keyed by the call's id, so a restored state, a retried step or a
 * second process that re-enters the tool gets "Not run: already executed (...)" as the
 * tool's result instead of a second run.
 *
 * The request is found by its idempotency key (`<runId>:<toolCallId>` unless given) when the
 * host already submitted it, else submitted here; its decision is verified against the call
 * as this wrapper knows it (the model's arguments, the key, the call id), never against
 * anything an answer says. Approved: the tool runs through `runApproved` with the approved
 * (possibly edited) params. Otherwise the tool's result is the text the model should read
 * (the reviewer's feedback, or their reply in place of the tool).
 */

import { submittedId, type ControlPlane } from './client.js';
import { SubmittedCall, type Json } from './decisions.js';
import type { Submitted } from './resume.js';

export interface ToolCall {
  actionType: string;
  /** The model's arguments, as the host submitted them. */
  params: Json;
  toolCallId: string;
  runId?: string;
  threadId?: string;
  target?: Json;
  allowedDecisions?: string[];
  reason?: string;
  /** Default `<runId>:<toolCallId>` (or the call id alone without a run). */
  idempotencyKey?: string;
}

export function toolIdempotencyKey(call: Pick<ToolCall, 'runId' | 'toolCallId' | 'idempotencyKey'>): string {
  return call.idempotencyKey ?? (call.runId ? `${call.runId}:${call.toolCallId}` : call.toolCallId);
}

/** The request a host already submitted for this call, or a new submission. */
async function findOrSubmit(cp: ControlPlane, call: ToolCall, idempotencyKey: string): Promise<Submitted> {
  const query = new URLSearchParams({ idempotency_key: idempotencyKey });
  const found = await cp.call<{ results?: Json[] }>('GET', `/api/v1/requests/?${query}`);
  const first = found.results?.[0];
  if (first === undefined) {
    return cp.submitAction({
      actionType: call.actionType,
      params: call.params,
      toolCallId: call.toolCallId,
      idempotencyKey,
      ...(call.runId ? { runId: call.runId } : {}),
      ...(call.threadId ? { threadId: call.threadId } : {}),
      ...(call.target ? { target: call.target } : {}),
      ...(call.allowedDecisions ? { allowedDecisions: call.allowedDecisions } : {}),
      ...(call.reason ? { reason: call.reason } : {}),
    });
  }
  // Bound to the call as this wrapper knows it: a listing rewritten to name another request fails verification.
  const submitted = SubmittedCall.action(call.actionType, call.params, { idempotencyKey, toolCallId: call.toolCallId });
  return { id: submittedId(first), request: first, call: submitted };
}

/**
 * Run `fn` for one approved tool call, at most once across processes: the result of `fn`,
 * or the text the model reads instead (a rejection's tool result, or "Not run: ...").
 */
export async function runTool<T>(
  cp: ControlPlane,
  call: ToolCall,
  fn: (params: Json) => T | Promise<T>,
  options: { timeout?: number } = {},
): Promise<T | string> {
  const submitted = await findOrSubmit(cp, call, toolIdempotencyKey(call));
  const resume = await cp.waitForDecision(submitted, options.timeout === undefined ? {} : { timeout: options.timeout });
  if (!resume.approved) return resume.toolResult;
  const outcome = await cp.runApproved(resume, fn);
  return outcome.ran ? outcome.result : outcome.toolResult;
}
