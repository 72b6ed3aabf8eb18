// The client and its execution handshake against a loopback stand-in of the agent API
// (fake-server.mjs), every answer signed as the server signs it; tamper hooks play the
// proxy between agent and server. Nothing the tool should not do may run.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ApprovalTimeout, ControlPlane, DecisionRefused, newNonce } from '../dist/index.js';
import { fakeServer, makeKey } from './fake-server.mjs';

const key = makeKey();
const ACTION = { actionType: 'Transfer_Funds', params: { amount: 90, to: 'acme', rate: 0.1 }, toolCallId: 'call_7' };

async function setUp(t, options = {}) {
  const server = await fakeServer({ key, ...options });
  t.after(() => server.close());
  const cp = new ControlPlane({
    url: server.url,
    token: 'cp_test',
    publicKeys: options.publicKeys ?? [key.publicText],
    retryBackoff: 0.01,
    pollWait: 1,
    env: {},
  });
  return { server, cp };
}

function tool() {
  const calls = [];
  const fn = async (params) => {
    calls.push(params);
    return { sent: params.amount };
  };
  return { calls, fn };
}

test('an approval with edits runs the tool once, with the edited params, and completes', async (t) => {
  const { server, cp } = await setUp(t, { edits: { amount: 50 } });
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  assert.equal(resume.approved, true);
  assert.equal(resume.decision.agent.name, 'pay-bot');
  assert.equal(cp.agent, 'pay-bot'); // pinned from the first verified decision
  const { calls, fn } = tool();
  const outcome = await cp.runApproved(resume, fn);
  assert.deepEqual(calls, [{ amount: 50, to: 'acme', rate: 0.1 }]);
  assert.deepEqual(outcome, { ran: true, requestId: resume.requestId, result: { sent: 50 }, completed: true });
  assert.deepEqual(server.state.completions, [
    { token: `grant-${resume.requestId}`, succeeded: true, result: { sent: 50 }, error: '' },
  ]);
  const claim = server.state.seen.find((r) => r.path.endsWith('/claim/'));
  assert.match(claim.body.nonce, /^[A-Za-z0-9_-]{43}$/);
});

test('a second run of the same approval is answered "Not run: already executed"', async (t) => {
  const { server, cp } = await setUp(t);
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  const { calls, fn } = tool();
  await cp.runApproved(resume, fn);
  const again = await cp.runApproved(resume, fn);
  assert.equal(calls.length, 1);
  assert.equal(again.ran, false);
  assert.equal(again.toolResult, `Not run: already executed (request ${resume.requestId}, succeeded/-)`);
  assert.equal(server.state.claims, 1);
});

test('a long tool renews its lease in the background', async (t) => {
  const { server, cp } = await setUp(t, { leaseMs: 900 });
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  const outcome = await cp.runApproved(resume, () => new Promise((resolve) => setTimeout(() => resolve('done'), 1300)));
  assert.equal(outcome.completed, true);
  assert.ok(server.state.renewals >= 2, `renewed ${server.state.renewals} times`);
});

test('a failing tool is completed as failed, and its error is thrown', async (t) => {
  const { server, cp } = await setUp(t);
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  await assert.rejects(
    cp.runApproved(resume, () => {
      throw new Error('bank down');
    }),
    /bank down/,
  );
  assert.equal(server.state.completions[0].succeeded, false);
  assert.match(server.state.completions[0].error, /bank down/);
});

const refusals = {
  'params altered in the claim answer': { 'POST claim': (a) => ({ ...a, params: { ...a.params, amount: 5000 } }) },
  'a grant whose signed nonce was altered': {
    'POST claim': (a) => {
      a.grant_signature.signed.nonce = newNonce();
      return a;
    },
  },
  'no grant signature': { 'POST claim': (a) => ({ ...a, grant_signature: undefined }) },
};

for (const [name, tamper] of Object.entries(refusals)) {
  test(`refused before running: ${name}`, async (t) => {
    const { cp } = await setUp(t, { tamper });
    const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
    const { calls, fn } = tool();
    await assert.rejects(cp.runApproved(resume, fn), DecisionRefused);
    assert.equal(calls.length, 0);
  });
}

test('refused before running: a genuine grant made for another claim (replayed to this process)', async (t) => {
  const { cp } = await setUp(t, { grantNonce: newNonce() });
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  const { calls, fn } = tool();
  await assert.rejects(cp.runApproved(resume, fn), /nonce/);
  assert.equal(calls.length, 0);
});

test('refused before running: the decision presented where a grant is expected', async (t) => {
  let decisionBlock;
  const { cp } = await setUp(t, {
    tamper: {
      'GET resume': (a) => void (decisionBlock = a.decision_signature),
      'POST claim': (a) => ({ ...a, grant_signature: decisionBlock }),
    },
  });
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  const { calls, fn } = tool();
  await assert.rejects(cp.runApproved(resume, fn), /grant_signature does not match/);
  assert.equal(calls.length, 0);
});

test('a resume altered in transit is refused by waitForDecision', async (t) => {
  const { cp } = await setUp(t, {
    tamper: { 'GET resume': (a) => ({ ...a, resume_data: { ...a.resume_data, params: { amount: 9000 } } }) },
  });
  await assert.rejects(cp.waitForDecision(await cp.submitAction(ACTION)), /payload_sha256/);
});

test('a submission answer naming another request of this agent is refused', async (t) => {
  const { cp } = await setUp(t);
  const first = await cp.submitAction({ ...ACTION, idempotencyKey: 'first' });
  const second = await cp.submitAction({ ...ACTION, params: { amount: 1 }, idempotencyKey: 'second' });
  // The proxy rewrote the second answer's id to the first request (an approval the agent holds already).
  await assert.rejects(cp.waitForDecision({ ...second, id: first.id }), /submitted_sha256|idempotency_key/);
});

test('without a pinned key nothing runs', async (t) => {
  const { cp } = await setUp(t, { publicKeys: [] });
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  assert.equal(resume.decision, null);
  const { calls, fn } = tool();
  await assert.rejects(cp.runApproved(resume, fn), /not verified/);
  assert.equal(calls.length, 0);
});

test('another agent\'s decision is refused when the agent is configured', async (t) => {
  const server = await fakeServer({ key, agent: { id: 8, name: 'other-bot' } });
  t.after(() => server.close());
  const cp = new ControlPlane({ url: server.url, token: 't', publicKeys: [key.publicText], agent: 'pay-bot', env: {} });
  await assert.rejects(cp.waitForDecision(await cp.submitAction(ACTION)), /another agent/);
});

test('a 503 is retried with the same idempotency key, and one request is made', async (t) => {
  const { server, cp } = await setUp(t);
  server.state.failNext = 2;
  const submitted = await cp.submitAction(ACTION);
  const posts = server.state.seen.filter((r) => r.path === '/api/v1/actions/');
  assert.equal(posts.length, 3);
  assert.equal(new Set(posts.map((r) => r.headers['idempotency-key'])).size, 1);
  assert.equal(server.state.requests.size, 1);
  assert.ok(submitted.id);
});

test('configuration: a key that does not parse throws; the environment is read', () => {
  assert.throws(() => new ControlPlane({ url: 'http://x', token: 't', publicKeys: ['ed25519:nope'], env: {} }));
  const cp = new ControlPlane({
    env: { CONTROLPLANE_URL: 'http://x/', CONTROLPLANE_TOKEN: 't', CONTROLPLANE_PUBLIC_KEYS: `${key.publicText}, ${key.publicText}`, CONTROLPLANE_AGENT: 'a' },
  });
  assert.equal(cp.url, 'http://x');
  assert.equal(cp.keys.size, 1);
  assert.equal(cp.agent, 'a');
  assert.throws(() => new ControlPlane({ env: {} }), /CONTROLPLANE_URL/);
});

test('waitForDecision gives up after its timeout with ApprovalTimeout', async (t) => {
  const { cp } = await setUp(t, { tamper: { 'GET resume': (a) => ({ request_id: a.request_id, decided: false }) } });
  await assert.rejects(cp.waitForDecision(await cp.submitAction(ACTION), { timeout: 0.2 }), ApprovalTimeout);
});

test('runTool: the tool body finds the host\'s request by its call id and runs once across processes', async (t) => {
  const { server, cp } = await setUp(t, { edits: { amount: 50 } });
  // The host submitted the call when the framework paused for approval...
  const call = { actionType: 'transfer_funds', params: { amount: 90, to: 'acme' }, toolCallId: 'call_9', runId: 'run-1' };
  const hosted = await cp.submitAction({ ...call, idempotencyKey: 'run-1:call_9', allowedDecisions: ['approve', 'reject'] });
  // ...and the framework runs the tool, in this process and (restored state) in another one.
  const { calls, fn } = tool();
  assert.deepEqual(await cp.runTool(call, fn), { sent: 50 });
  const other = new ControlPlane({ url: server.url, token: 't', publicKeys: [key.publicText], env: {} });
  const second = await other.runTool(call, fn);
  assert.equal(second, `Not run: already executed (request ${hosted.id}, succeeded/-)`);
  assert.deepEqual(calls, [{ amount: 50, to: 'acme' }]);
  assert.equal(server.state.requests.size, 1);
});

test('runTool: with no request yet it submits one; a listing naming another request is refused', async (t) => {
  const { server, cp } = await setUp(t);
  const { calls, fn } = tool();
  const call = { actionType: 'transfer_funds', params: { amount: 5 }, toolCallId: 'call_1', runId: 'r' };
  assert.deepEqual(await cp.runTool(call, fn), { sent: 5 });
  assert.equal(server.state.requests.size, 1);
  // Another call whose lookup a proxy answers with the first call's request: its decision names another call.
  const lying = await setUp(t);
  const first = await lying.cp.submitAction({ ...call, idempotencyKey: 'r:call_1' });
  lying.server.state.requests.get(first.id).key = 'r:call_2'; // the listing for call_2 now names call_1's request
  await assert.rejects(lying.cp.runTool({ ...call, params: { amount: 6 }, toolCallId: 'call_2' }, fn), DecisionRefused);
  assert.equal(calls.length, 1);
});

test('a decision not checked against the call this client made is not run', async (t) => {
  const { cp } = await setUp(t);
  const submitted = await cp.submitAction(ACTION);
  const resume = await cp.waitForDecision(submitted.id); // by id alone: signature checked, call binding not
  const { calls, fn } = tool();
  await assert.rejects(cp.runApproved(resume, fn), /not checked against the call/);
  assert.equal(calls.length, 0);
});

test('a claim refused as illegal_transition is "already executed" only when the call went through a claim', async (t) => {
  const { server, cp } = await setUp(t);
  const resume = await cp.waitForDecision(await cp.submitAction(ACTION));
  const request = server.state.requests.get(resume.requestId);
  const { calls, fn } = tool();
  // The server's answer to a claim of a request that is no longer approved.
  const refuse = (state, resolution) => {
    Object.assign(request, { claimed: false, state, resolution });
    server.state.failClaim = { code: 'illegal_transition', message: `The request is ${state}.` };
  };
  refuse('failed', 'outcome_unknown');
  assert.equal((await cp.runApproved(resume, fn)).toolResult, `Not run: already executed (request ${resume.requestId}, failed/outcome_unknown)`);
  refuse('failed', 'approval_expired'); // refused before running: the refusal itself is the answer
  await assert.rejects(cp.runApproved(resume, fn), /illegal_transition/);
  assert.equal(calls.length, 0);
});
