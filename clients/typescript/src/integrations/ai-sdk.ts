/**
 * The Vercel AI SDK (`ai` 7): `generateText` / `streamText` with the `toolApproval` option
 * (which replaced the tool-level `needsApproval`) stop at a `tool-approval-request` part;
 * each becomes an action on the control plane, and the reviewer's verified decision becomes
 * the `tool-approval-response` to send back (`approved`, and the reviewer's words as its
 * `reason`, which the model reads when the call is denied). The SDK then runs an approved
 * tool itself, whenever those messages are sent again (a retried request, a second server
 * replaying the same conversation), so the tool's `execute` is wrapped (`controlledTool`,
 * `controlledExecute`): it runs only through the execution handshake keyed by the call id,
 * and a replay gets "Not run: already executed (...)" as the tool's output.
 *
 * Typed structurally: the few SDK shapes used are declared here, so this package keeps no
 * dependency on the SDK.
 *
 *     import { generateText, tool } from 'ai';
 *     import { approvalRequests, controlledTool, decideApprovals, userApproval } from 'hitl-controlplane/ai-sdk';
 *     const tools = { transfer_funds: controlledTool(cp, 'transfer_funds', tool({...}), { runId }) };
 *     const first = await generateText({ model, tools, toolApproval: userApproval(tools), messages });
 *     messages.push(...first.response.messages);
 *     messages.push(await decideApprovals(cp, approvalRequests(first.content), { runId }));
 *     const second = await generateText({ model, tools, toolApproval: userApproval(tools), messages });
 */

import type { ControlPlane } from '../client.js';
import { DecisionRefused, type Json } from '../decisions.js';
import type { Resume, Submitted } from '../resume.js';
import { toolIdempotencyKey } from '../tools.js';

/** A `tool-approval-request` part (generateText's `content`, streamText's `fullStream`). */
export interface ApprovalRequestPart {
  type: 'tool-approval-request';
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
  isAutomatic?: boolean;
}

/** The `tool-approval-response` part of a `tool` message. */
export interface ApprovalResponsePart {
  type: 'tool-approval-response';
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/** The tool message that carries the decisions back to generateText / streamText. */
export interface ApprovalMessage {
  role: 'tool';
  content: ApprovalResponsePart[];
}

/** How a tool call maps onto a control-plane action. */
export interface CallOptions {
  /**
   * Correlates the host's submission with the tool's claim: the idempotency key is
   * `<runId>:<toolCallId>`. The same value must reach `decideApprovals` and the tool wrapper.
   */
  runId?: string;
  /** The action type submitted (default: the tool's name). */
  actionType?: string | ((toolName: string) => string);
  target?: Json | ((params: Json) => Json);
  reason?: string;
  threadId?: string;
  /**
   * Called with each `DecisionRefused` inside the tool (an answer altered in transit, a grant
   * that is not this claim's). The SDK turns a tool's error into an error result for the model
   * and goes on, so this is how the host learns that nothing ran and must stop.
   */
  onRefused?: (error: DecisionRefused) => void;
}

export interface DecideOptions extends CallOptions {
  /** Seconds to wait for each decision (default: as long as it takes). */
  timeout?: number;
}

/** One approval request as decided. */
export interface Decided {
  request: ApprovalRequestPart;
  submitted: Submitted;
  resume: Resume;
  response: ApprovalResponsePart;
}

function actionTypeOf(options: CallOptions, toolName: string): string {
  if (typeof options.actionType === 'function') return options.actionType(toolName);
  return options.actionType ?? toolName;
}

function paramsOf(toolCallId: string, input: unknown): Json {
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) return input as Json;
  throw new DecisionRefused(`tool call ${toolCallId}: its input is not a JSON object, so nothing is submitted or run`);
}

function correlation(options: CallOptions, params: Json) {
  const target = typeof options.target === 'function' ? options.target(params) : options.target;
  return {
    ...(options.runId ? { runId: options.runId } : {}),
    ...(target ? { target } : {}),
    ...(options.threadId ? { threadId: options.threadId } : {}),
    ...(options.reason ? { reason: options.reason } : {}),
  };
}

/** The `tool-approval-request` parts among `parts` (a result's `content`, collected stream parts);
 * automatic ones (decided by `toolApproval` itself) are left out. */
export function approvalRequests(parts: Iterable<{ type: string }>): ApprovalRequestPart[] {
  const found: ApprovalRequestPart[] = [];
  for (const part of parts) {
    if (part.type === 'tool-approval-request' && !(part as ApprovalRequestPart).isAutomatic) {
      found.push(part as ApprovalRequestPart);
    }
  }
  return found;
}

/** A message as the SDK stores it, as far as it is read here. */
export interface MessageLike {
  role: string;
  content: unknown;
}

/**
 * The approval requests in stored messages (`response.messages` saved, loaded in another
 * process) that no `tool-approval-response` answered yet, each with the tool call it is for.
 */
export function pendingApprovals(messages: Iterable<MessageLike>): ApprovalRequestPart[] {
  type Part = { type?: string; toolCallId?: string; toolName?: string; input?: unknown; approvalId?: string };
  const calls = new Map<string, Part>();
  const asked: Part[] = [];
  const answered = new Set<string>();
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as Part[]) {
      if (part.type === 'tool-call' && part.toolCallId) calls.set(part.toolCallId, part);
      if (part.type === 'tool-approval-request') asked.push(part);
      if (part.type === 'tool-approval-response' && part.approvalId) answered.add(part.approvalId);
    }
  }
  const pending: ApprovalRequestPart[] = [];
  for (const part of asked) {
    if (!part.approvalId || answered.has(part.approvalId)) continue;
    const call = part.toolCallId === undefined ? undefined : calls.get(part.toolCallId);
    if (!call?.toolCallId || !call.toolName) {
      throw new DecisionRefused(`approval ${part.approvalId}: no tool call in the messages for ${part.toolCallId}`);
    }
    pending.push({
      type: 'tool-approval-request',
      approvalId: part.approvalId,
      toolCall: { toolCallId: call.toolCallId, toolName: call.toolName, input: call.input },
    });
  }
  return pending;
}

/** `toolApproval` asking a person for each of these tools (`{name: 'user-approval'}`). */
export function userApproval(tools: Record<string, unknown> | string[]): Record<string, 'user-approval'> {
  const names = Array.isArray(tools) ? tools : Object.keys(tools);
  return Object.fromEntries(names.map((name) => [name, 'user-approval' as const]));
}

/** Submit one approval request as an action (idempotent: submitted again, it finds its request). */
export function submitApprovalRequest(
  cp: ControlPlane,
  request: ApprovalRequestPart,
  options: CallOptions = {},
): Promise<Submitted> {
  const { toolCallId, toolName, input } = request.toolCall;
  const params = paramsOf(toolCallId, input);
  return cp.submitAction({
    actionType: actionTypeOf(options, toolName),
    params,
    toolCallId,
    idempotencyKey: toolIdempotencyKey({ runId: options.runId, toolCallId }),
    ...correlation(options, params),
  });
}

/**
 * Each request submitted, its decision awaited and verified, and answered: the tool message
 * of `tool-approval-response` parts to append to the messages before calling the SDK again.
 * A denial carries the reviewer's words as its `reason`. A decision that does not verify
 * throws `DecisionRefused`, and nothing is answered.
 */
export async function decideApprovals(
  cp: ControlPlane,
  requests: Iterable<ApprovalRequestPart>,
  options: DecideOptions = {},
): Promise<ApprovalMessage & { decided: Decided[] }> {
  const decided: Decided[] = [];
  for (const request of requests) {
    const submitted = await submitApprovalRequest(cp, request, options);
    const resume = await cp.waitForDecision(submitted, options.timeout === undefined ? {} : { timeout: options.timeout });
    const response: ApprovalResponsePart = {
      type: 'tool-approval-response',
      approvalId: request.approvalId,
      approved: resume.approved,
      ...(resume.approved ? {} : { reason: resume.toolResult || `request ${resume.requestId} was ${resume.state}` }),
    };
    decided.push({ request, submitted, resume, response });
  }
  // `decided` is not part of the message: kept off JSON so the message can be stored as it is.
  const message = { role: 'tool' as const, content: decided.map((d) => d.response) };
  Object.defineProperty(message, 'decided', { value: decided, enumerable: false });
  return message as ApprovalMessage & { decided: Decided[] };
}

/**
 * What the model reads when the client refused a call inside the tool. The SDK shows the model
 * a tool's error as `error-text`; this says it was a refusal and that nothing ran, so the model
 * takes it neither for a failure to retry nor for a result. It is a fixed text: the reason
 * quotes what the network said (a key id, a nonce), which someone in between chose, and none
 * of that reaches the model; the host reads the reason (`cause`, `onRefused`).
 */
export const REFUSED_MESSAGE =
  'Not run: the control plane client refused this call (its approval or grant did not verify), so nothing was executed. Do not retry it.';

/**
 * The error the tool throws for a refusal: the SDK ends the tool call with it (a `tool-error`,
 * never a result) and the model reads its message. `cause` is the client's DecisionRefused.
 */
export class ToolCallRefused extends DecisionRefused {
  override name = 'ToolCallRefused';

  constructor(refusal: DecisionRefused) {
    super(REFUSED_MESSAGE, { cause: refusal });
  }
}

/** What the SDK hands a tool's `execute` besides its input, as far as it is read here. */
export interface ToolExecutionOptions {
  toolCallId?: string;
}

type Execute<A, O, R> = (input: A, options: O) => R | Promise<R>;

/**
 * `execute` wrapped in the handshake: the call (by `options.toolCallId`) runs through
 * `runTool` with the approved (possibly edited) params in place of the model's input, at most
 * once across processes; otherwise the tool's output is the text the model reads. A call
 * without an id cannot be keyed, so it is refused rather than run. A refusal (a decision or
 * grant that does not verify, an answer altered in transit) aborts the tool before it runs:
 * `onRefused` gets the client's DecisionRefused, and the SDK gets a `ToolCallRefused`, whose
 * message (REFUSED_MESSAGE, a fixed text) is what the model reads.
 */
export function controlledExecute<A, O extends ToolExecutionOptions, R>(
  cp: ControlPlane,
  toolName: string,
  execute: Execute<A, O, R>,
  options: CallOptions = {},
): (input: A, executionOptions: O) => Promise<R | string> {
  return async (input, executionOptions) => {
    const refused = (error: DecisionRefused): never => {
      options.onRefused?.(error);
      throw new ToolCallRefused(error);
    };
    const toolCallId = executionOptions?.toolCallId;
    if (!toolCallId) {
      return refused(
        new DecisionRefused(`tool ${toolName}: the SDK gave no call id, so the call cannot be claimed and is not run`),
      );
    }
    try {
      const params = paramsOf(toolCallId, input);
      return await cp.runTool(
        { actionType: actionTypeOf(options, toolName), params, toolCallId, ...correlation(options, params) },
        (granted) => execute(granted as A, executionOptions),
      );
    } catch (error) {
      if (error instanceof DecisionRefused && !(error instanceof ToolCallRefused)) return refused(error);
      throw error;
    }
  };
}

/** `tool({...})` with its `execute` run through the handshake (`controlledExecute`). */
export function controlledTool<T extends { execute?: Execute<any, any, any> }>(
  cp: ControlPlane,
  toolName: string,
  tool: T,
  options: CallOptions = {},
): T {
  if (typeof tool.execute !== 'function') {
    throw new TypeError(`controlledTool: ${toolName} has no execute (a client-side tool is not run here)`);
  }
  return { ...tool, execute: controlledExecute(cp, toolName, tool.execute, options) };
}

