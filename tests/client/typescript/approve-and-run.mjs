// An agent on the built TypeScript package (clients/typescript/dist), driven by
// tests/client/test_typescript_client.py against a real daphne. It reports JSON lines:
// submitted -> decided -> (ran) -> outcome, or refused (DecisionRefused) with its message.
// CONTROLPLANE_URL, _TOKEN, _PUBLIC_KEYS and _AGENT come from the environment; IDEMPOTENCY_KEY
// makes a second process find the same request (a restarted host).
const { ControlPlane, DecisionRefused } = await import(process.env.PACKAGE);

const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');

const PARAMS = { amount: 90, to: 'acme', memo: 'Q3 \u00e9 \u{1F4B8}', rate: 0.1 };
const cp = new ControlPlane({ pollWait: 5 });
const submitted = await cp.submitAction({
  actionType: 'Transfer_Funds',
  target: { account: 'acme' },
  params: PARAMS,
  toolCallId: 'call_7',
  runId: 'run-ts-1',
  idempotencyKey: process.env.IDEMPOTENCY_KEY,
  reason: 'The user asked to pay the Q3 invoice.',
});
emit('submitted', { id: submitted.id });
try {
  const resume = await cp.waitForDecision(submitted);
  emit('decided', { state: resume.state, approved: resume.approved, params: resume.params, decision: resume.decision });
  if (process.env.MODE === 'tool') {
    // The framework runs the tool itself (restored state: twice, in two clients); the body finds the
    // host's request by `<runId>:<toolCallId>` and runs at most once.
    const call = { actionType: 'Transfer_Funds', params: PARAMS, toolCallId: 'call_7', runId: 'run-ts-1' };
    for (const client of [cp, new ControlPlane({ pollWait: 5 })]) {
      const result = await client.runTool(call, async (params) => {
        emit('ran', { params });
        return { sent: params.amount };
      });
      emit('tool_result', { result });
    }
  } else if (process.env.CLAIM === '1') {
    const outcome = await cp.runApproved(resume, async (params) => {
      emit('ran', { params });
      // TOOL_SECONDS: a long tool (the test may kill this process while it runs)
      await new Promise((resolve) => setTimeout(resolve, Number(process.env.TOOL_SECONDS ?? 0) * 1000));
      return { sent: params.amount };
    });
    emit('outcome', { ...outcome, completionError: outcome.completionError?.message });
  }
} catch (error) {
  if (!(error instanceof DecisionRefused)) throw error;
  emit('refused', { message: error.message });
}
