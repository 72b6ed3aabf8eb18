// Path 1: seed 002's `approval-flow` workflow (normalize -> approval -> receipt). When a
// run suspends at `approval`, the host sends the suspend payload and the step's
// resumeSchema (as JSON Schema) to /api/v1/suspensions/, waits for the reviewer's
// answer, and resumes the run with `resume_data` exactly as the server validated it.
import { Mastra } from '@mastra/core/mastra';
import { createStep, createWorkflow } from '@mastra/core/workflows';
import { z } from 'zod';

import { emit, submitSuspension, waitForDecision } from './controlplane.mjs';

// The workflow as seed 002 writes it.
const inputSchema = z.object({ amount: z.number().positive() });
const approvalOutput = z.object({ amount: z.number(), decision: z.enum(['approved', 'rejected', 'automatic']) });
const outputSchema = approvalOutput.extend({ receipt: z.string() });
const resumeSchema = z.object({ approved: z.boolean() });
const executions = { normalize: 0, approval: 0, receipt: 0 };

const normalize = createStep({
  id: 'normalize', inputSchema, outputSchema: inputSchema,
  execute: async ({ inputData }) => {
    executions.normalize++;
    return { amount: Math.round(inputData.amount * 100) / 100 };
  },
});

const approval = createStep({
  id: 'approval', inputSchema, outputSchema: approvalOutput,
  resumeSchema,
  suspendSchema: z.object({ amount: z.number(), reason: z.string() }),
  execute: async ({ inputData, resumeData, suspend }) => {
    executions.approval++;
    if (inputData.amount > 100 && resumeData === undefined) {
      return await suspend({ amount: inputData.amount, reason: 'Amount exceeds automatic approval limit' });
    }
    return {
      amount: inputData.amount,
      decision: resumeData === undefined ? 'automatic' : resumeData.approved ? 'approved' : 'rejected',
    };
  },
});

const receipt = createStep({
  id: 'receipt', inputSchema: approvalOutput, outputSchema,
  execute: async ({ inputData }) => {
    executions.receipt++;
    return { ...inputData, receipt: `${inputData.decision}:${inputData.amount.toFixed(2)}` };
  },
});

const workflow = createWorkflow({ id: 'approval-flow', inputSchema, outputSchema })
  .then(normalize).then(approval).then(receipt).commit();
const mastra = new Mastra({ logger: false, workflows: { workflow } });

// The host.
const run = await mastra.getWorkflow('workflow').createRun();
const started = await run.start({ inputData: { amount: Number(process.env.AMOUNT ?? '150.125') } });
if (started.status !== 'suspended') {
  emit('result', { status: started.status, result: started.result, executions });
} else {
  const [stepId] = started.suspended[0];
  const submitted = await submitSuspension({
    title: `Approve ${workflow.id} at ${stepId}`,
    summary: started.steps[stepId].suspendPayload.reason,
    workflow_id: workflow.id,
    step_id: stepId,
    run_id: run.runId,
    suspend_payload: started.steps[stepId].suspendPayload,
    resume_schema: z.toJSONSchema(resumeSchema), // zod 4 writes draft 2020-12
    idempotency_key: `${run.runId}:${stepId}`,
  });
  emit('submitted', { request_id: submitted.id, step: stepId, suspend_payload: started.steps[stepId].suspendPayload });

  const decision = await waitForDecision(submitted.id);
  if (decision.resume_data === null) {
    // Refused (or expired, cancelled): there is no answer to resume the step with; end the run.
    await run.cancel();
    const { status } = await mastra.getWorkflow('workflow').getWorkflowRunById(run.runId);
    emit('result', { status, state: decision.state, resume_data: decision.resume_data, executions });
  } else {
    const resumed = await run.resume({ step: stepId, resumeData: decision.resume_data });
    emit('result', { status: resumed.status, result: resumed.result, state: decision.state,
                     resume_data: decision.resume_data, executions });
  }
}
await mastra.shutdown?.();
