/**
 * The OpenAI Agents SDK for JS (`@openai/agents`): a tool with `needsApproval` interrupts the
 * run; each interruption becomes an action on the control plane, and the reviewer's verified
 * decision becomes `state.approve(item)` or `state.reject(item, {message})` (the reviewer's
 * words are the text the model reads). The SDK then runs the approved tool itself, from the
 * same process or from a `RunState` restored with `RunState.fromString` anywhere, so the
 * tool's `execute` is wrapped (`controlledTool`, `controlledExecute`): it runs only through
 * the execution handshake keyed by the call id, and a restored state that re-enters it gets
 * "Not run: already executed (...)" as the tool's result instead of a second run.
 *
 * Typed structurally: the few SDK shapes used are declared here, so this package keeps no
 * dependency on the SDK.
 *
 *     import { tool, run, RunState } from '@openai/agents';
 *     import { controlledTool, decideInterruptions } from 'hitl-controlplane/openai-agents';
 *     const transfer = tool(controlledTool(cp, { name: 'transfer_funds', parameters, execute }, { runId }));
 *     let result = await run(agent, input);
 *     while (result.interruptions.length > 0) {
 *       await decideInterruptions(cp, result.state, { runId });   // approve / reject each, as decided
 *       result = await run(agent, result.state);
 *     }
 */

import type { ControlPlane } from '../client.js';
import { DecisionRefused, type Json } from '../decisions.js';
import type { Resume, Submitted } from '../resume.js';
import { toolIdempotencyKey } from '../tools.js';

/** The function call an interruption or a tool invocation names (`protocol.FunctionCallItem`). */
export interface FunctionCallItem {
  type?: string;
  callId?: string;
  name?: string;
  arguments?: string;
}

/** `RunToolApprovalItem`, as far as it is read here. */
export interface ApprovalItem {
  rawItem: FunctionCallItem;
  readonly name?: string | undefined;
  readonly arguments?: string | undefined;
}

/** `RunState`, as far as it is used here. */
export interface ApprovalState {
  getInterruptions(): ApprovalItem[];
  approve(item: ApprovalItem, options?: { alwaysApprove?: boolean }): void;
  reject(item: ApprovalItem, options?: { alwaysReject?: boolean; message?: string }): void;
}

/** The third argument of a function tool's `execute` (`ToolCallDetails`). */
export interface ToolCallDetails {
  toolCall?: FunctionCallItem;
}

/** How a tool call maps onto a control-plane action. */
export interface CallOptions {
  /**
   * Correlates the host's submission with the tool's claim: the idempotency key is
   * `<runId>:<callId>`. The same value (or function of the run's context) must be given to
   * `decideInterruptions` and to the tool wrapper; a host that restores a state knows it.
   */
  runId?: string | ((context: unknown) => string | undefined);
  /** The action type submitted (default: the tool's name). */
  actionType?: string | ((toolName: string) => string);
  target?: Json | ((params: Json) => Json);
  reason?: string;
  threadId?: string;
}

export interface DecideOptions extends CallOptions {
  /** The run's context (`result.state.context.context`), for a `runId` function. */
  context?: unknown;
  /** Seconds to wait for each decision (default: as long as it takes). */
  timeout?: number;
}

/** One interruption as decided: the SDK was told `approve` or `reject` accordingly. */
export interface Decided {
  item: ApprovalItem;
  submitted: Submitted;
  resume: Resume;
  approved: boolean;
}

function resolveRunId(options: CallOptions, context: unknown): string | undefined {
  return typeof options.runId === 'function' ? options.runId(context) : options.runId;
}

function actionTypeOf(options: CallOptions, toolName: string): string {
  if (typeof options.actionType === 'function') return options.actionType(toolName);
  return options.actionType ?? toolName;
}

/** The model's arguments as the SDK holds them (a JSON text): the params every side submits and verifies. */
function argumentsOf(call: FunctionCallItem, fallback?: unknown): Json {
  if (typeof call.arguments === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(call.arguments === '' ? '{}' : call.arguments);
    } catch {
      throw new DecisionRefused(`tool call ${call.callId}: its arguments are not JSON, so nothing is submitted or run`);
    }
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json;
  }
  if (fallback !== null && typeof fallback === 'object' && !Array.isArray(fallback)) return fallback as Json;
  throw new DecisionRefused(`tool call ${call.callId}: its arguments are not a JSON object`);
}

function callOf(item: ApprovalItem): FunctionCallItem & { callId: string; name: string } {
  const raw = item.rawItem;
  const callId = raw.callId;
  const name = raw.name ?? item.name;
  if ((raw.type !== undefined && raw.type !== 'function_call') || !callId || !name) {
    throw new DecisionRefused(
      `an interruption that is not a function tool call (${raw.type ?? 'no type'}) cannot be put through the control plane`,
    );
  }
  return { ...raw, callId, name, arguments: raw.arguments ?? item.arguments ?? '{}' };
}

/** Submit one interruption as an action (idempotent: the same call submitted again finds its request). */
export function submitInterruption(cp: ControlPlane, item: ApprovalItem, options: DecideOptions = {}): Promise<Submitted> {
  const call = callOf(item);
  const params = argumentsOf(call);
  const runId = resolveRunId(options, options.context);
  const target = typeof options.target === 'function' ? options.target(params) : options.target;
  return cp.submitAction({
    actionType: actionTypeOf(options, call.name),
    params,
    toolCallId: call.callId,
    idempotencyKey: toolIdempotencyKey({ runId, toolCallId: call.callId }),
    ...(runId ? { runId } : {}),
    ...(target ? { target } : {}),
    ...(options.threadId ? { threadId: options.threadId } : {}),
    ...(options.reason ? { reason: options.reason } : {}),
  });
}

/**
 * Every interruption of `state` submitted, its decision awaited and verified, and the SDK told:
 * `state.approve(item)` when approved (the wrapped tool then runs through the handshake), else
 * `state.reject(item, {message})` with the reviewer's words for the model. A decision that
 * does not verify throws `DecisionRefused` and that call is neither approved nor rejected.
 */
export async function decideInterruptions(
  cp: ControlPlane,
  state: ApprovalState,
  options: DecideOptions = {},
): Promise<Decided[]> {
  const decided: Decided[] = [];
  for (const item of state.getInterruptions()) {
    const submitted = await submitInterruption(cp, item, options);
    const resume = await cp.waitForDecision(submitted, options.timeout === undefined ? {} : { timeout: options.timeout });
    if (resume.approved) state.approve(item);
    else state.reject(item, { message: resume.toolResult || `Not run: request ${resume.requestId} was ${resume.state}` });
    decided.push({ item, submitted, resume, approved: resume.approved });
  }
  return decided;
}

type Execute<A, C, R> = (input: A, context?: C, details?: ToolCallDetails) => R | Promise<R>;

/**
 * `execute` wrapped in the handshake: the call (found by its call id in `details.toolCall`)
 * runs through `runTool`, with the approved (possibly edited) params in place of the model's,
 * at most once across processes; otherwise the tool's result is the text the model reads.
 * A call without an id cannot be keyed, so it is refused rather than run.
 */
export function controlledExecute<A, C, R>(
  cp: ControlPlane,
  toolName: string,
  execute: Execute<A, C, R>,
  options: CallOptions = {},
): (input: A, context?: C, details?: ToolCallDetails) => Promise<R | string> {
  return async (input, context, details) => {
    const call = details?.toolCall;
    if (!call?.callId) {
      throw new DecisionRefused(`tool ${toolName}: the SDK gave no call id, so the call cannot be claimed and is not run`);
    }
    const params = argumentsOf(call, input);
    const runId = resolveRunId(options, (context as { context?: unknown } | undefined)?.context);
    const target = typeof options.target === 'function' ? options.target(params) : options.target;
    return cp.runTool(
      {
        actionType: actionTypeOf(options, toolName),
        params,
        toolCallId: call.callId,
        ...(runId ? { runId } : {}),
        ...(target ? { target } : {}),
        ...(options.threadId ? { threadId: options.threadId } : {}),
        ...(options.reason ? { reason: options.reason } : {}),
      },
      (granted) => execute(granted as A, context, details),
    );
  };
}

/** The options of `tool({...})`, as far as they are changed here. */
export interface ToolOptionsLike<A, C, R> {
  name?: string;
  execute: Execute<A, C, R>;
  needsApproval?: unknown;
  outputSchema?: unknown;
  errorFunction?: ((context: C, error: unknown, details?: ToolCallDetails) => unknown) | null;
}

const TOOL_FAILED = 'An error occurred while running the tool. Please try again.';

/**
 * `tool({...})`'s options with `needsApproval: true` and `execute` run through the handshake
 * (`controlledExecute`). A `DecisionRefused` (an answer altered in transit, a grant that is not
 * this claim's) is never turned into a tool result: it ends the run, and nothing ran.
 */
export function controlledTool<O extends ToolOptionsLike<any, any, any>>(
  cp: ControlPlane,
  toolOptions: O,
  options: CallOptions = {},
): O & { needsApproval: true } {
  const name = toolOptions.name;
  if (!name) throw new TypeError('controlledTool: the tool needs a name (it is the action type unless one is given)');
  // The SDK's own default: a tool with an output schema rethrows, others answer a generic text.
  const own = toolOptions.errorFunction === undefined && toolOptions.outputSchema !== undefined ? null : toolOptions.errorFunction;
  return {
    ...toolOptions,
    needsApproval: true,
    execute: controlledExecute(cp, name, toolOptions.execute, options),
    errorFunction: (context: unknown, error: unknown, details?: ToolCallDetails) => {
      if (error instanceof DecisionRefused || own === null) throw error;
      return own ? own(context, error, details) : TOOL_FAILED;
    },
  };
}

/**
 * The `DecisionRefused` behind an error a run rejected with (the SDK wraps a tool's error in
 * its own `ToolCallError`, whose `error` is the original), or null.
 */
export function refusalOf(error: unknown): DecisionRefused | null {
  for (let current = error, depth = 0; current !== null && typeof current === 'object' && depth < 8; depth++) {
    if (current instanceof DecisionRefused) return current;
    const wrapped = current as { error?: unknown; cause?: unknown };
    current = wrapped.error ?? wrapped.cause;
  }
  return null;
}
