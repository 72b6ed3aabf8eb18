// The integration against the real `ai` 7 (generateText and streamText with `toolApproval`)
// and its mock model, with a stand-in for the control plane (the live tests against a real
// daphne are in tests/interop/typescript_ai_sdk). Checks the wiring: the approval request is
// submitted with the call id and the model's input, the decision becomes the
// tool-approval-response (feedback as its reason), execute goes through runTool keyed by the
// call id with the granted params, stored messages give the pending requests back, and a
// DecisionRefused reaches the host through onRefused while nothing runs and the model reads a refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { DecisionRefused } from 'hitl-controlplane';
import {
  REFUSED_MESSAGE,
  ToolCallRefused,
  approvalRequests,
  controlledTool,
  decideApprovals,
  pendingApprovals,
  userApproval,
} from 'hitl-controlplane/ai-sdk';
import { CALL_ID, INPUT, scriptedModel } from '../scripted.mjs';

function standIn({ approved = true, toolResult = '', granted = INPUT, refuse = false } = {}) {
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
      return fn(granted);
    },
  };
}

function setup(cp, executed, refusals = []) {
  const { model, read } = scriptedModel();
  const tools = {
    transfer_funds: controlledTool(
      cp,
      'transfer_funds',
      tool({
        description: 'Send money.',
        inputSchema: jsonSchema({ type: 'object', properties: { amount: { type: 'number' }, to: { type: 'string' } } }),
        execute: async (input) => {
          executed.push(input);
          return `sent ${input.amount} to ${input.to}`;
        },
      }),
      { runId: 'run-1', onRefused: (error) => refusals.push(error) },
    ),
  };
  return { model, read, tools, refusals };
}

async function collect(result) {
  const parts = [];
  for await (const part of result.fullStream) parts.push(part);
  return { content: parts, response: await result.response };
}

for (const mode of ['generateText', 'streamText']) {
  const call = (options) => (mode === 'generateText' ? generateText(options) : collect(streamText(options)));

  test(`${mode}: an approval runs execute through the handshake with the granted params`, async () => {
    const cp = standIn({ granted: { amount: 50, to: 'acme' } });
    const executed = [];
    const { model, read, tools } = setup(cp, executed);
    const messages = [{ role: 'user', content: 'pay acme' }];
    const first = await call({ model, tools, toolApproval: userApproval(tools), messages });
    const requests = approvalRequests(first.content);
    assert.equal(requests.length, 1);
    assert.deepEqual(executed, []); // not before the decision
    // Stored and loaded as JSON, as another process would.
    const stored = JSON.parse(JSON.stringify([...messages, ...first.response.messages]));
    assert.deepEqual(
      pendingApprovals(stored).map((r) => r.toolCall),
      [{ toolCallId: CALL_ID, toolName: 'transfer_funds', input: INPUT }],
    );
    const answer = await decideApprovals(cp, pendingApprovals(stored), { runId: 'run-1' });
    assert.deepEqual(answer.content, [{ type: 'tool-approval-response', approvalId: requests[0].approvalId, approved: true }]);
    assert.equal(cp.calls.submitted[0].idempotencyKey, `run-1:${CALL_ID}`);
    assert.equal(pendingApprovals([...stored, answer]).length, 0);
    await call({ model, tools, toolApproval: userApproval(tools), messages: [...stored, answer] });
    assert.equal(cp.calls.ran[0].toolCallId, CALL_ID);
    assert.deepEqual(cp.calls.ran[0].params, INPUT);
    assert.deepEqual(executed, [{ amount: 50, to: 'acme' }]);
    assert.deepEqual(read, ['sent 50 to acme']);
  });
}

test("a denial is the tool-approval-response with the reviewer's words as its reason", async () => {
  const cp = standIn({ approved: false, toolResult: 'Rejected by alice: ask finance first.' });
  const executed = [];
  const { model, read, tools } = setup(cp, executed);
  const messages = [{ role: 'user', content: 'pay acme' }];
  const first = await generateText({ model, tools, toolApproval: userApproval(tools), messages });
  const answer = await decideApprovals(cp, approvalRequests(first.content), { runId: 'run-1' });
  assert.equal(answer.content[0].reason, 'Rejected by alice: ask finance first.');
  await generateText({
    model,
    tools,
    toolApproval: userApproval(tools),
    messages: [...messages, ...first.response.messages, answer],
  });
  assert.deepEqual(executed, []);
  assert.deepEqual(cp.calls.ran, []);
  assert.deepEqual(read, ['Rejected by alice: ask finance first.']);
});

test('a DecisionRefused inside the tool aborts it, reaches the host, and the model reads a refusal', async () => {
  const cp = standIn({ refuse: true });
  const executed = [];
  const { model, read, tools, refusals } = setup(cp, executed);
  const messages = [{ role: 'user', content: 'pay acme' }];
  const first = await generateText({ model, tools, toolApproval: userApproval(tools), messages });
  const answer = await decideApprovals(cp, approvalRequests(first.content), { runId: 'run-1' });
  const ended = [];
  await generateText({
    model,
    tools,
    toolApproval: userApproval(tools),
    messages: [...messages, ...first.response.messages, answer],
    onToolExecutionEnd: (event) => ended.push(event.toolOutput),
  });
  assert.equal(refusals.length, 1);
  assert.ok(refusals[0] instanceof DecisionRefused);
  assert.deepEqual(executed, []);
  const reason = 'request req-1: the params to run are not the granted ones';
  assert.equal(refusals[0].message, reason);
  // The SDK ended the call with the refusal (a tool-error, never a tool-result)...
  assert.deepEqual(ended.map((output) => output.type), ['tool-error']);
  assert.ok(ended[0].error instanceof ToolCallRefused && ended[0].error.cause === refusals[0]);
  // ...and the model read that it was refused and that nothing ran; the reason went to the host only.
  assert.deepEqual(read, [`ToolCallRefused: ${REFUSED_MESSAGE}`]);
});
