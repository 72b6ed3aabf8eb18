// Path 3: Mastra's own submit_plan tool. It suspends with `{path}`; the host reads
// the file, submits the plan, and resumes the tool with the control plane's
// `resume_data` as it is. What the model is shown next is the tool's own text.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Agent } from '@mastra/core/agent';
import { submitPlanTool } from '@mastra/core/harness';
import { Mastra } from '@mastra/core/mastra';

import { emit, submitPlan, waitForDecision } from './controlplane.mjs';
import { scriptedModel, text, toolCall, toolResultSeen } from './scripted.mjs';

const path = join(await mkdtemp(join(tmpdir(), 'plans-')), 'add-dark-mode.md');
await writeFile(path, process.env.PLAN_MARKDOWN);

const { model, prompts } = scriptedModel([toolCall('plan-1', 'submit_plan', { path }), text('Understood.')]);
const mastra = new Mastra({
  logger: false,
  agents: {
    planner: new Agent({ id: 'planner', name: 'planner', instructions: 'Plan first.', model,
                         tools: { submit_plan: submitPlanTool } }),
  },
});
const agent = mastra.getAgent('planner');

const stream = await agent.stream('Add a dark mode.');
let suspended = null;
for await (const chunk of stream.fullStream) {
  if (chunk.type === 'tool-call-suspended' && chunk.payload.toolName === 'submit_plan') suspended = chunk.payload;
}
if (suspended === null) throw new Error('submit_plan did not suspend');

const { toolCallId } = suspended;
const submitted = await submitPlan({
  path: suspended.suspendPayload.path,
  plan: await readFile(suspended.suspendPayload.path, 'utf8'),
  tool_call_id: toolCallId,
  run_id: stream.runId,
  idempotency_key: `${stream.runId}:${toolCallId}`,
});
emit('submitted', { request_id: submitted.id, suspended });

const decision = await waitForDecision(submitted.id);
const next = await agent.resumeStream(decision.resume_data, { runId: stream.runId, toolCallId });
let toolResult = null;
for await (const chunk of next.fullStream) {
  if (chunk.type === 'tool-result') toolResult = chunk.payload.result;
}

emit('result', {
  state: decision.state,
  resume_data: decision.resume_data,
  tool_result: decision.tool_result,
  tool_returned: toolResult,
  model_saw: toolResultSeen(prompts, toolCallId),
});
