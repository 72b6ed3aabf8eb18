// A host on the real @openai/agents with a scripted model, driven by
// tests/interop/typescript_openai_agents against a real daphne. JSON lines on stdout.
//   PHASE=start:  run the agent; its needsApproval interruption is submitted as an action;
//                 the RunState is saved with toString() to STATE_FILE.
//   PHASE=resume: RunState.fromString(STATE_FILE); the decision is awaited and verified and
//                 becomes state.approve / state.reject; the run goes on (the SDK runs the
//                 wrapped tool, which goes through the handshake); what the model read is printed.
// CONTROLPLANE_URL, _TOKEN, _PUBLIC_KEYS, _AGENT come from the environment; RUN_ID keys the call.
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, RunState, run, setTracingDisabled, tool } from '@openai/agents';
import { ControlPlane, DecisionRefused } from 'hitl-controlplane';
import { controlledTool, decideInterruptions, refusalOf, submitInterruption } from 'hitl-controlplane/openai-agents';
import { ScriptedModel } from '../scripted.mjs';

setTracingDisabled(true);
const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');

const runId = process.env.RUN_ID;
const cp = new ControlPlane({ pollWait: 5 });
const model = new ScriptedModel();
const transfer = tool(
  controlledTool(
    cp,
    {
      name: 'transfer_funds',
      description: 'Send money to an account.',
      strict: false,
      parameters: {
        type: 'object',
        properties: { amount: { type: 'number' }, to: { type: 'string' } },
        required: ['amount', 'to'],
        additionalProperties: false,
      },
      execute: async (params) => {
        emit('ran', { params });
        await new Promise((resolve) => setTimeout(resolve, Number(process.env.TOOL_SECONDS ?? 0) * 1000));
        return JSON.stringify({ sent: params.amount, to: params.to });
      },
    },
    { runId, target: (params) => ({ account: params.to }) },
  ),
);
const agent = new Agent({ name: 'payer', instructions: 'Pay what the user asks.', model, tools: [transfer] });

try {
  if (process.env.PHASE === 'start') {
    const result = await run(agent, 'Pay the Q3 invoice: 90 to acme.');
    const ids = [];
    for (const item of result.interruptions) ids.push((await submitInterruption(cp, item, { runId })).id);
    writeFileSync(process.env.STATE_FILE, result.state.toString());
    emit('interrupted', { ids, callIds: result.interruptions.map((item) => item.rawItem.callId) });
  } else {
    const state = await RunState.fromString(agent, readFileSync(process.env.STATE_FILE, 'utf8'));
    const decided = await decideInterruptions(cp, state, { runId });
    emit('decided', { approved: decided.map((d) => d.approved), ids: decided.map((d) => d.resume.requestId) });
    const result = await run(agent, state);
    emit('finished', { finalOutput: result.finalOutput, read: model.read });
  }
} catch (error) {
  // The SDK wraps a tool's error (ToolCallError); the refusal is what the host must see.
  const refused = error instanceof DecisionRefused ? error : refusalOf(error);
  if (refused === null) throw error;
  emit('refused', { message: refused.message, read: model.read });
}
