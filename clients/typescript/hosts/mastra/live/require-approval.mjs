// A requireApproval tool wrapped by controlledTool, against a real daphne (CONTROLPLANE_* from
// the environment; TOOL_CALL_ID names the model's call). The host's review submits the
// approval chunk and waits; approve -> approveToolCall, and the tool runs through the handshake.
// REENTER=1: the same call enters the tool again afterwards (a retried or resumed step).
import { ControlPlane, DecisionRefused } from 'hitl-controlplane';
import { mastraCallKey, reviewToolApproval } from 'hitl-controlplane/mastra';

import { ARGS, mailer, untilApproval } from '../mailer.mjs';
import { toolResultSeen } from '../scripted.mjs';
import { emit } from './emit.mjs';

const toolCallId = process.env.TOOL_CALL_ID ?? 'call-1';
const cp = new ControlPlane({ pollWait: 5 });
const { agent, sent, tool, prompts } = mailer(cp, {
  toolCallId,
  onRun: (args) => emit('running', { args }), // TOOL_SECONDS: the test may kill this process now
  seconds: Number(process.env.TOOL_SECONDS ?? 0),
});
const { approval, runId } = await untilApproval(agent);
emit('waiting', { approval, idempotency_key: mastraCallKey('mailer', toolCallId) });

let reviewed;
try {
  reviewed = await reviewToolApproval(cp, agent, approval, { runId });
} catch (error) {
  if (!(error instanceof DecisionRefused)) throw error;
  emit('refused', { message: error.message, sent: [...sent] });
  process.exit(0);
}
const { stream, approved, resume } = reviewed;
const chunks = [];
for await (const chunk of stream.fullStream) chunks.push(chunk.type);
emit('result', {
  approved,
  state: resume.state,
  sent: [...sent],
  chunks,
  model_saw: toolResultSeen(prompts, toolCallId),
  text: await stream.text,
});
if (process.env.REENTER === '1') {
  let again;
  try {
    again = await tool.execute(ARGS, { agent: { agentId: 'mailer', toolCallId } });
  } catch (error) {
    if (!(error instanceof DecisionRefused)) throw error;
    again = `DecisionRefused: ${error.message}`;
  }
  emit('reentered', { result: again, sent: [...sent] });
}
