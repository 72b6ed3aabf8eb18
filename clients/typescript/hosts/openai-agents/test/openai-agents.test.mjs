// The integration against the real @openai/agents runner and a scripted model, with a stand-in
// for the control plane (the live tests against a real daphne are in
// tests/interop/typescript_openai_agents). Checks the wiring: needsApproval is set, the
// interruption is submitted with the call id and the model's arguments, the decision becomes
// approve/reject, execute goes through runTool keyed by the call id, and a DecisionRefused
// ends the run instead of becoming a tool result.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, RunState, run, setTracingDisabled, tool } from '@openai/agents';
import { DecisionRefused } from 'hitl-controlplane';
import { controlledTool, decideInterruptions, refusalOf } from 'hitl-controlplane/openai-agents';
import { ARGUMENTS, CALL_ID, ScriptedModel } from '../scripted.mjs';

setTracingDisabled(true);

/** What the integration calls on a ControlPlane, recorded; `decide` answers waitForDecision. */
function standIn({ approved = true, toolResult = '', granted = ARGUMENTS, refuse = false, fail = false } = {}) {
  const calls = { submitted: [], ran: [] };
  return {
    calls,
    async submitAction(input) {
      calls.submitted.push(input);
      return { id: 'req-1', request: {}, call: null };
    },
    async waitForDecision(submitted) {
      return { requestId: submitted.id, approved, toolResult, state: approved ? 'approved' : 'rejected' };
    },
    async runTool(call, fn) {
      calls.ran.push(call);
      if (refuse) throw new DecisionRefused('request req-1: the params to run are not the granted ones');
      if (fail) throw new Error('the bank is down');
      return fn(granted);
    },
  };
}

function agentWith(cp, model, executed) {
  const transfer = tool(
    controlledTool(
      cp,
      {
        name: 'transfer_funds',
        description: 'Send money.',
        strict: false,
        parameters: { type: 'object', properties: { amount: { type: 'number' }, to: { type: 'string' } } },
        execute: async (params) => {
          executed.push(params);
          return `sent ${params.amount} to ${params.to}`;
        },
      },
      { runId: 'run-1' },
    ),
  );
  return new Agent({ name: 'payer', model, tools: [transfer] });
}

async function interruptAndRestore(cp, executed) {
  const model = new ScriptedModel();
  const agent = agentWith(cp, model, executed);
  const first = await run(agent, 'pay acme');
  assert.equal(first.interruptions.length, 1);
  // Restored from its text, as another process would.
  const state = await RunState.fromString(agent, first.state.toString());
  return { agent, model, state };
}

test('an approved interruption runs execute through the handshake, keyed by the call id', async () => {
  const cp = standIn({ granted: { amount: 50, to: 'acme' } });
  const executed = [];
  const { agent, model, state } = await interruptAndRestore(cp, executed);
  const decided = await decideInterruptions(cp, state, { runId: 'run-1' });
  assert.deepEqual(
    decided.map((d) => d.approved),
    [true],
  );
  assert.equal(cp.calls.submitted[0].idempotencyKey, `run-1:${CALL_ID}`);
  assert.deepEqual(cp.calls.submitted[0].params, ARGUMENTS);
  await run(agent, state);
  assert.equal(cp.calls.ran[0].toolCallId, CALL_ID);
  assert.deepEqual(cp.calls.ran[0].params, ARGUMENTS); // what the decision is verified against
  assert.deepEqual(executed, [{ amount: 50, to: 'acme' }]); // what the tool runs with: the granted params
  assert.deepEqual(model.read, ['sent 50 to acme']);
});

test("a rejection is state.reject with the reviewer's words, and execute never runs", async () => {
  const cp = standIn({ approved: false, toolResult: 'Rejected by alice: ask finance first.' });
  const executed = [];
  const { agent, model, state } = await interruptAndRestore(cp, executed);
  await decideInterruptions(cp, state, { runId: 'run-1' });
  await run(agent, state);
  assert.deepEqual(executed, []);
  assert.deepEqual(cp.calls.ran, []);
  assert.deepEqual(model.read, ['Rejected by alice: ask finance first.']);
});

test('a DecisionRefused inside the tool ends the run; it never becomes a tool result', async () => {
  const cp = standIn({ refuse: true });
  const executed = [];
  const { agent, model, state } = await interruptAndRestore(cp, executed);
  await decideInterruptions(cp, state, { runId: 'run-1' });
  const error = await run(agent, state).then(
    () => null,
    (e) => e,
  );
  assert.ok(refusalOf(error) instanceof DecisionRefused, String(error));
  assert.deepEqual(executed, []);
  assert.deepEqual(model.read, []);
});

test("the tool's own error is still a tool result (the SDK's generic text), not a refusal", async () => {
  const cp = standIn({ fail: true });
  const executed = [];
  const { agent, model, state } = await interruptAndRestore(cp, executed);
  await decideInterruptions(cp, state, { runId: 'run-1' });
  await run(agent, state);
  assert.deepEqual(model.read, ['An error occurred while running the tool. Please try again.']);
});
