/**
 * Mastra (`@mastra/core`): its three human-in-the-loop protocols through the control plane.
 * Typed structurally (the few Mastra shapes used are declared here): this package has no
 * runtime dependency, and works with the Mastra the host installed.
 *
 * 1. A `requireApproval` tool. Mastra runs the tool itself once the host calls
 *    `approveToolCall`, so the handshake sits inside the tool: `controlledTool(cp, config)`
 *    wraps the config's `execute` (before `createTool`), keyed by the call's
 *    `context.agent.toolCallId`. On entry it finds the request the host submitted for this
 *    call, verifies its signed decision against the model's arguments, claims, verifies the
 *    grant, runs the body once and completes. A retried or resumed step that re-enters the
 *    tool is answered "Not run: already executed (...)". The host side is
 *    `reviewToolApproval(cp, agent, chunk.payload, ...)`: submit, wait, then approve or decline.
 *    `approveToolCall` carries no arguments, so an approval of edited params is answered as a
 *    rejection asking the model to call again with exactly the approved args.
 * 2. A workflow step's `suspend()`: `resumeSuspendedRun(cp, run, result, ...)` submits the
 *    suspension, waits for the reviewers' validated answer and resumes the run with it.
 * 3. Mastra's own `submit_plan` tool: `answerSubmitPlan(cp, agent, chunk.payload, ...)` submits
 *    the plan and resumes the tool with the server's `resume_data` as it is, so the tool hands
 *    the model exactly the server's `tool_result` (Mastra's own texts).
 */

import { readFile } from 'node:fs/promises';

import { submittedId, type ControlPlane } from '../client.js';
import { SubmittedCall, type Json } from '../decisions.js';
import type { Resume } from '../resume.js';

/** What an edited approval answers instead (the same text as the Python client's). */
export const EDITED_MESSAGE =
  'A reviewer approved this call only with changed arguments. Call the tool again with exactly these arguments: ';

/** The idempotency key of one tool call's request: the same on the host and inside the tool. */
export function mastraCallKey(agentId: string, toolCallId: string): string {
  return `mastra:${agentId}:${toolCallId}`.slice(0, 200);
}

/** JSON with sorted keys: the edited params as the model reads them. */
function sortedJson(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v as Json)
              .sort()
              .map((k) => [k, sort((v as Json)[k])]),
          )
        : v;
  return JSON.stringify(sort(value));
}

const sameJson = (a: unknown, b: unknown): boolean => sortedJson(a) === sortedJson(b);

/**
 * What the model reads instead of running the call; null when it may run as the model asked.
 * A rejection: the reviewer's feedback (else the server's tool_result); an edited approval:
 * the instruction to call again with exactly the approved arguments.
 */
export function rejectionReason(resume: Resume, args: unknown): string | null {
  if (!resume.approved) return resume.feedback || resume.reply || resume.toolResult;
  if (!sameJson(resume.params, args ?? {})) return EDITED_MESSAGE + sortedJson(resume.params);
  return null;
}

// --- 1. requireApproval tools ------------------------------------------------------------------

/** The part of Mastra's tool execution context the wrapper reads. */
export interface MastraToolContext {
  agent?: { agentId?: string; toolCallId?: string; threadId?: string; resourceId?: string };
  [key: string]: unknown;
}

/** A `createTool` config (or anything with an `id` and an `execute`). */
export interface MastraToolConfig<I, O> {
  id: string;
  execute?: (input: I, context: MastraToolContext) => O | Promise<O>;
  requireApproval?: unknown;
  [key: string]: unknown;
}

export interface ControlledToolOptions {
  /** Default the tool's id. */
  actionType?: string;
  /** Default `mastraCallKey(agentId, toolCallId)`; must match what the host submitted. */
  idempotencyKey?: (context: MastraToolContext) => string;
  /** Seconds the tool waits for a decision when the host submitted none (default: as long as it takes). */
  timeout?: number;
}

function callKey(context: MastraToolContext, options: ControlledToolOptions): string {
  if (options.idempotencyKey) return options.idempotencyKey(context);
  const agentId = context.agent?.agentId;
  const toolCallId = context.agent?.toolCallId;
  if (!agentId || !toolCallId) throw new Error('hitl-controlplane/mastra: the tool ran without an agent tool call id');
  return mastraCallKey(agentId, toolCallId);
}

/**
 * Run one call of a tool through the handshake: the body's result, or the text the model reads
 * instead (a rejection's reason, an edited approval's instruction, "Not run: already executed").
 */
export async function runMastraCall<I, O>(
  cp: ControlPlane,
  actionType: string,
  args: I,
  context: MastraToolContext,
  body: (input: I, context: MastraToolContext) => O | Promise<O>,
  options: ControlledToolOptions = {},
): Promise<O | string> {
  const toolCallId = String(context.agent?.toolCallId ?? '');
  const idempotencyKey = callKey(context, options);
  const params = (args ?? {}) as Json;
  // Bound to the call as this tool knows it (the model's arguments, the key, the call id),
  // never to what a listing says: an answer naming another request fails verification.
  const call = SubmittedCall.action(actionType, params, { idempotencyKey, toolCallId });
  const query = new URLSearchParams({ idempotency_key: idempotencyKey });
  const found = await cp.call<{ results?: Json[] }>('GET', `/api/v1/requests/?${query}`);
  const first = found.results?.[0];
  const submitted =
    first === undefined
      ? await cp.submitAction({
          actionType,
          params,
          toolCallId,
          idempotencyKey,
          allowedDecisions: ['approve', 'reject'],
          ...(context.agent?.threadId ? { threadId: context.agent.threadId } : {}),
          ...(context.agent?.resourceId ? { resourceId: context.agent.resourceId } : {}),
        })
      : submittedId(first);
  const resume = await cp.waitForDecision(submitted, {
    call,
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
  });
  const refused = rejectionReason(resume, params);
  if (refused !== null) return refused;
  // Approved as the model asked: the granted params are exactly these arguments.
  const outcome = await cp.runApproved(resume, (granted) => body(granted as I, context));
  return outcome.ran ? outcome.result : outcome.toolResult;
}

/**
 * A `createTool` config whose `execute` runs through the handshake, with `requireApproval`
 * on (unless the config says otherwise): `createTool(controlledTool(cp, {id, inputSchema, execute}))`.
 * Its result is the body's, or a text (a rejection, "Not run: ..."): an `outputSchema` must admit a string.
 */
export function controlledTool<I, O, C extends MastraToolConfig<I, O>>(
  cp: ControlPlane,
  config: C,
  options: ControlledToolOptions = {},
): C & { execute: (input: I, context: MastraToolContext) => Promise<O | string> } {
  const body = config.execute;
  if (typeof body !== 'function') throw new Error(`hitl-controlplane/mastra: tool ${config.id} has no execute`);
  const actionType = options.actionType ?? config.id;
  return {
    ...config,
    requireApproval: config.requireApproval ?? true,
    execute: (input: I, context: MastraToolContext) => runMastraCall(cp, actionType, input, context, body, options),
  };
}

/** Mastra's `tool-call-approval` chunk payload. */
export interface ToolApprovalPayload {
  toolCallId: string;
  toolName: string;
  args: unknown;
}

/** The agent methods the host answers with. */
export interface MastraApprovingAgent<S> {
  id: string;
  approveToolCall(options: { runId: string; toolCallId: string }): Promise<S>;
  declineToolCall(options: { runId: string; toolCallId: string; reason?: string }): Promise<S>;
}

export interface ReviewOptions {
  runId: string;
  actionType?: string;
  target?: Json;
  reason?: string;
  threadId?: string;
  /** Seconds; ApprovalTimeout after it. */
  timeout?: number;
}

/**
 * The host's half: the approval chunk becomes an action (keyed as the tool will look it up),
 * the verified decision becomes `approveToolCall` (the wrapped tool then runs it once) or
 * `declineToolCall` with the reason the model should read. Returns the next stream and the resume.
 */
export async function reviewToolApproval<S>(
  cp: ControlPlane,
  agent: MastraApprovingAgent<S>,
  approval: ToolApprovalPayload,
  options: ReviewOptions,
): Promise<{ stream: S; resume: Resume; approved: boolean }> {
  const { toolCallId, toolName } = approval;
  const params = (approval.args ?? {}) as Json;
  const submitted = await cp.submitAction({
    actionType: options.actionType ?? toolName,
    params,
    toolCallId,
    runId: options.runId,
    idempotencyKey: mastraCallKey(agent.id, toolCallId),
    // approveToolCall runs the call as the model made it: reviewers are not offered an edit.
    allowedDecisions: ['approve', 'reject'],
    ...(options.target ? { target: options.target } : {}),
    ...(options.reason ? { reason: options.reason } : {}),
    ...(options.threadId ? { threadId: options.threadId } : {}),
  });
  const resume = await cp.waitForDecision(
    submitted,
    options.timeout === undefined ? {} : { timeout: options.timeout },
  );
  const reason = rejectionReason(resume, params);
  const ids = { runId: options.runId, toolCallId };
  const stream =
    reason === null ? await agent.approveToolCall(ids) : await agent.declineToolCall({ ...ids, reason });
  return { stream, resume, approved: reason === null };
}

// --- 2. a workflow step's suspension -----------------------------------------------------------

/** A workflow run's result, as `run.start()` / `run.resume()` give it. */
export interface MastraRunResult {
  status: string;
  suspended?: string[][];
  steps?: Record<string, { suspendPayload?: unknown } | undefined>;
  [key: string]: unknown;
}

export interface MastraRun<R extends MastraRunResult> {
  runId: string;
  resume(options: { step: string | string[]; resumeData: unknown }): Promise<R>;
  cancel?(): Promise<unknown>;
}

export interface SuspensionOptions {
  workflowId: string;
  /** The suspended step's `resumeSchema` as JSON Schema (zod 4: `z.toJSONSchema(schema)`). */
  resumeSchema: Json;
  title?: string;
  summary?: string;
  timeout?: number;
}

/**
 * A suspended run's first suspended step goes to the control plane as a suspension; the
 * reviewers' answer, exactly as the server validated it against `resumeSchema`, resumes the
 * run. Refused (or expired, cancelled): there is no answer, the run is cancelled and
 * `resumed` is false. A run that is not suspended is returned as it is.
 */
export async function resumeSuspendedRun<R extends MastraRunResult>(
  cp: ControlPlane,
  run: MastraRun<R>,
  result: R,
  options: SuspensionOptions,
): Promise<{ resumed: boolean; result: R; resume: Resume | null }> {
  const path = result.suspended?.[0];
  if (result.status !== 'suspended' || !path || path.length === 0) return { resumed: false, result, resume: null };
  const stepId = path.join('.');
  const payload = (result.steps?.[path[0] as string]?.suspendPayload ?? {}) as Json;
  const submitted = await cp.submitSuspension({
    title: options.title ?? `Approve ${options.workflowId} at ${stepId}`,
    ...(options.summary ? { summary: options.summary } : {}),
    workflowId: options.workflowId,
    stepId,
    runId: run.runId,
    suspendPayload: payload,
    resumeSchema: options.resumeSchema,
    idempotencyKey: `${run.runId}:${stepId}`,
  });
  const resume = await cp.waitForDecision(
    submitted,
    options.timeout === undefined ? {} : { timeout: options.timeout },
  );
  if (resume.resumeData === null) {
    await run.cancel?.();
    return { resumed: false, result, resume };
  }
  const step = path.length === 1 ? (path[0] as string) : path;
  return { resumed: true, result: await run.resume({ step, resumeData: resume.resumeData }), resume };
}

// --- 3. submit_plan ----------------------------------------------------------------------------

/** Mastra's `tool-call-suspended` chunk payload for `submit_plan`. */
export interface PlanSuspendedPayload {
  toolCallId: string;
  toolName: string;
  suspendPayload: { path: string };
}

export interface MastraResumingAgent<S> {
  resumeStream(resumeData: unknown, options: { runId: string; toolCallId: string }): Promise<S>;
}

/**
 * `submit_plan` suspended with `{path}`: the plan (read from the file) goes to the control
 * plane, and the tool resumes with the verified decision's `resume_data` as it is, so it
 * hands the model exactly the server's `tool_result`.
 */
export async function answerSubmitPlan<S>(
  cp: ControlPlane,
  agent: MastraResumingAgent<S>,
  suspended: PlanSuspendedPayload,
  options: { runId: string; plan?: string; title?: string; timeout?: number },
): Promise<{ stream: S; resume: Resume }> {
  const { toolCallId } = suspended;
  const path = suspended.suspendPayload.path;
  const submitted = await cp.submitPlan({
    path,
    plan: options.plan ?? (await readFile(path, 'utf8')),
    runId: options.runId,
    toolCallId,
    idempotencyKey: `${options.runId}:${toolCallId}`,
    ...(options.title ? { title: options.title } : {}),
  });
  const resume = await cp.waitForDecision(
    submitted,
    options.timeout === undefined ? {} : { timeout: options.timeout },
  );
  const stream = await agent.resumeStream(resume.resumeData, { runId: options.runId, toolCallId });
  return { stream, resume };
}
