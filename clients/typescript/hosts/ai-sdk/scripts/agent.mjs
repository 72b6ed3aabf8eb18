// A host on the real `ai` 7 with its mock model, driven by tests/interop/typescript_ai_sdk
// against a real daphne. JSON lines on stdout.
//   PHASE=start:  generateText (or streamText with STREAM=1) with `toolApproval` stops at a
//                 tool-approval-request; it is submitted as an action; the messages are saved
//                 (JSON) to STATE_FILE.
//   PHASE=resume: the saved messages; the verified decision becomes the tool-approval-response
//                 (the feedback as its reason); the SDK is called again and runs the wrapped
//                 tool, which goes through the handshake; what the model read is printed.
import { readFileSync, writeFileSync } from 'node:fs';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { ControlPlane, DecisionRefused } from 'hitl-controlplane';
import {
  approvalRequests,
  controlledTool,
  decideApprovals,
  pendingApprovals,
  submitApprovalRequest,
  userApproval,
} from 'hitl-controlplane/ai-sdk';
import { scriptedModel } from '../scripted.mjs';

const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');

const runId = process.env.RUN_ID;
const cp = new ControlPlane({ pollWait: 5 });
const { model, read } = scriptedModel();
const refusals = [];
const tools = {
  transfer_funds: controlledTool(
    cp,
    'transfer_funds',
    tool({
      description: 'Send money to an account.',
      inputSchema: jsonSchema({
        type: 'object',
        properties: { amount: { type: 'number' }, to: { type: 'string' } },
        required: ['amount', 'to'],
      }),
      execute: async (input) => {
        emit('ran', { params: input });
        await new Promise((resolve) => setTimeout(resolve, Number(process.env.TOOL_SECONDS ?? 0) * 1000));
        return `sent ${input.amount} to ${input.to}`;
      },
    }),
    { runId, target: (params) => ({ account: params.to }), onRefused: (error) => refusals.push(error) },
  ),
};

/** One call of the SDK: its content parts and the messages it added. */
async function step(messages) {
  const options = { model, tools, toolApproval: userApproval(tools), messages };
  if (process.env.STREAM === '1') {
    const result = streamText(options);
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    return { parts, added: (await result.response).messages };
  }
  const result = await generateText(options);
  return { parts: result.content, added: result.response.messages };
}

try {
  if (process.env.PHASE === 'start') {
    const messages = [{ role: 'user', content: 'Pay the Q3 invoice: 90 to acme.' }];
    const { parts, added } = await step(messages);
    const requests = approvalRequests(parts);
    const ids = [];
    for (const request of requests) ids.push((await submitApprovalRequest(cp, request, { runId })).id);
    writeFileSync(process.env.STATE_FILE, JSON.stringify([...messages, ...added]));
    emit('interrupted', { ids, callIds: requests.map((request) => request.toolCall.toolCallId) });
  } else {
    const messages = JSON.parse(readFileSync(process.env.STATE_FILE, 'utf8'));
    const requests = pendingApprovals(messages);
    const answer = await decideApprovals(cp, requests, { runId });
    emit('decided', { approved: answer.content.map((part) => part.approved), reasons: answer.content.map((p) => p.reason) });
    await step([...messages, answer]);
    if (refusals.length > 0) throw refusals[0];
    emit('finished', { read });
  }
} catch (error) {
  if (!(error instanceof DecisionRefused)) throw error;
  emit('refused', { message: error.message, read });
}
