// Path 2: an Agent whose tool has `requireApproval`. The stream's `tool-call-approval`
// chunk becomes an action on the control plane; the reviewer's decision becomes
// approveToolCall (the tool runs) or declineToolCall (the feedback is the reason).
import { isDeepStrictEqual } from 'node:util';

import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

import { emit, submitAction, waitForDecision } from './controlplane.mjs';
import { scriptedModel, text, toolCall, toolResultSeen } from './scripted.mjs';

const sent = [];
const sendEmail = createTool({
  id: 'send_email',
  description: 'Send an email.',
  inputSchema: z.object({ to: z.array(z.string()), subject: z.string(), body: z.string() }),
  requireApproval: true,
  execute: async ({ to, subject }) => {
    sent.push({ to, subject });
    return { delivered: to.length };
  },
});

const args = { to: ['dana@example.com'], subject: 'Quarterly numbers', body: 'Attached.' };
const { model, prompts } = scriptedModel([toolCall('call-1', 'send_email', args), text('Done.')]);
const mastra = new Mastra({
  logger: false,
  agents: { mailer: new Agent({ id: 'mailer', name: 'mailer', instructions: 'Send mail.', model, tools: { send_email: sendEmail } }) },
});
const agent = mastra.getAgent('mailer');

const stream = await agent.stream('Send Dana the quarterly numbers.');
let approval = null;
for await (const chunk of stream.fullStream) {
  if (chunk.type === 'tool-call-approval') approval = chunk.payload;
}
if (approval === null) throw new Error('the stream yielded no tool-call-approval chunk');

const { toolCallId, toolName } = approval;
const submitted = await submitAction({
  action_type: toolName,
  params: approval.args,
  tool_call_id: toolCallId,
  run_id: stream.runId,
  idempotency_key: `${stream.runId}:${toolCallId}`,
  allowed_decisions: ["approve", "reject"], // approveToolCall runs the call as the model made it: no edits
});
emit('submitted', { request_id: submitted.id, approval });

const decision = await waitForDecision(submitted.id);
// approveToolCall runs the model's own args: go ahead only if they are what was approved
// (the server guarantees it where edits are not allowed; a host checks anyway).
const approved = decision.resume_data.action === 'approved'
  && isDeepStrictEqual(decision.resume_data.params, approval.args);
const next = approved
  ? await agent.approveToolCall({ runId: stream.runId, toolCallId })
  : await agent.declineToolCall({
      runId: stream.runId, toolCallId, reason: decision.resume_data.feedback ?? decision.tool_result,
    });
const chunks = [];
for await (const chunk of next.fullStream) chunks.push(chunk.type);

emit('result', {
  state: decision.state,
  resume_data: decision.resume_data,
  executed: sent.length,
  sent,
  chunks,
  model_saw: toolResultSeen(prompts, toolCallId),
  text: await next.text,
});
