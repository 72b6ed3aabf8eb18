// controlledTool + reviewToolApproval with the real @mastra/core and a scripted model, against
// the client's loopback stand-in for the server (signed decisions and grants): approve runs the
// tool once through the handshake; re-entering the tool (a retried or resumed step) does not.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ControlPlane } from 'hitl-controlplane';
import { reviewToolApproval } from 'hitl-controlplane/mastra';

import { fakeServer, makeKey } from '../../../test/fake-server.mjs';
import { ARGS, mailer, untilApproval } from '../mailer.mjs';
import { toolResultSeen } from '../scripted.mjs';

async function withServer(options, body) {
  const key = makeKey();
  const server = await fakeServer({ key, ...options });
  try {
    await body(server, new ControlPlane({ url: server.url, token: 't', publicKeys: [key.publicText], pollWait: 1 }));
  } finally {
    await server.close();
  }
}

test('approve runs the wrapped tool once, and a re-entry is answered "Not run"', () =>
  withServer({}, async (server, cp) => {
    const { agent, sent, tool, prompts } = mailer(cp);
    const { approval, runId } = await untilApproval(agent);
    assert.equal(sent.length, 0);
    const { stream, approved } = await reviewToolApproval(cp, agent, approval, { runId });
    assert.equal(approved, true);
    assert.equal(await stream.text, 'Done.');
    assert.deepEqual(sent, [{ to: ARGS.to, subject: ARGS.subject }]);
    assert.equal(server.state.claims, 1);
    assert.deepEqual(toolResultSeen(prompts, 'call-1')?.value, { delivered: 1 });
    // The same call entered again (a retried step, a restored run): no second run.
    const again = await tool.execute(ARGS, { agent: { agentId: 'mailer', toolCallId: 'call-1' } });
    assert.match(again, /^Not run: already executed \(request [0-9a-f-]+, /);
    assert.equal(sent.length, 1);
  }));

test('an approval of edited params declines the call, asking for exactly the approved args', () =>
  withServer({ edits: { subject: 'Q3 numbers' } }, async (server, cp) => {
    const { agent, sent, prompts } = mailer(cp);
    const { approval, runId } = await untilApproval(agent);
    const { stream, approved } = await reviewToolApproval(cp, agent, approval, { runId });
    assert.equal(approved, false);
    await stream.text;
    assert.equal(sent.length, 0);
    assert.equal(server.state.claims, 0);
    const seen = JSON.stringify(toolResultSeen(prompts, 'call-1'));
    assert.match(seen, /Call the tool again with exactly these arguments/);
    assert.match(seen, /Q3 numbers/);
  }));
