// Mastra's own submit_plan tool; its suspension goes through answerSubmitPlan, which resumes the
// tool with the verified decision's resume_data as it is. PLAN_MARKDOWN is the plan.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Agent } from '@mastra/core/agent';
import { submitPlanTool } from '@mastra/core/harness';
import { Mastra } from '@mastra/core/mastra';
import { ControlPlane } from 'hitl-controlplane';
import { answerSubmitPlan } from 'hitl-controlplane/mastra';

import { scriptedModel, text, toolCall, toolResultSeen } from '../scripted.mjs';
import { emit } from './emit.mjs';

const path = join(await mkdtemp(join(tmpdir(), 'plans-')), 'add-dark-mode.md');
await writeFile(path, process.env.PLAN_MARKDOWN);
const { model, prompts } = scriptedModel([toolCall('plan-1', 'submit_plan', { path }), text('Understood.')]);
const mastra = new Mastra({
  logger: false,
  agents: {
    planner: new Agent({ id: 'planner', name: 'planner', instructions: 'Plan first.', model, tools: { submit_plan: submitPlanTool } }),
  },
});
const agent = mastra.getAgent('planner');
const stream = await agent.stream('Add a dark mode.');
let suspended = null;
for await (const chunk of stream.fullStream) {
  if (chunk.type === 'tool-call-suspended' && chunk.payload.toolName === 'submit_plan') suspended = chunk.payload;
}
if (suspended === null) throw new Error('submit_plan did not suspend');
emit('suspended', { suspended, idempotency_key: `${stream.runId}:${suspended.toolCallId}` });

const cp = new ControlPlane({ pollWait: 5 });
const { stream: next, resume } = await answerSubmitPlan(cp, agent, suspended, { runId: stream.runId });
let toolReturned = null;
for await (const chunk of next.fullStream) {
  if (chunk.type === 'tool-result') toolReturned = chunk.payload.result;
}
emit('result', {
  request_id: resume.requestId,
  state: resume.state,
  resume_data: resume.resumeData,
  tool_result: resume.toolResult,
  tool_returned: toolReturned,
  model_saw: toolResultSeen(prompts, suspended.toolCallId),
});
