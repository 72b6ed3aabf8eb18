// Seed 002's `approval-flow` workflow (normalize -> approval -> receipt); its suspension goes
// through resumeSuspendedRun: submitted, the reviewers' validated answer resumes the run, a
// refusal cancels it; an answer that does not verify (DecisionRefused) never resumes it.
// AMOUNT sets the input.
import { Mastra } from '@mastra/core/mastra';
import { createStep, createWorkflow } from '@mastra/core/workflows';
import { ControlPlane, DecisionRefused } from 'hitl-controlplane';
import { resumeSuspendedRun } from 'hitl-controlplane/mastra';
import { z } from 'zod';

import { emit } from './emit.mjs';

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
  id: 'approval', inputSchema, outputSchema: approvalOutput, resumeSchema,
  suspendSchema: z.object({ amount: z.number(), reason: z.string() }),
  execute: async ({ inputData, resumeData, suspend }) => {
    executions.approval++;
    if (inputData.amount > 100 && resumeData === undefined) {
      return await suspend({ amount: inputData.amount, reason: 'Amount exceeds automatic approval limit' });
    }
    const decision = resumeData === undefined ? 'automatic' : resumeData.approved ? 'approved' : 'rejected';
    return { amount: inputData.amount, decision };
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

const cp = new ControlPlane({ pollWait: 5 });
const run = await mastra.getWorkflow('workflow').createRun();
const started = await run.start({ inputData: { amount: Number(process.env.AMOUNT ?? '150.125') } });
emit('started', { status: started.status, run_id: run.runId });
let answered;
try {
  answered = await resumeSuspendedRun(cp, run, started, {
    workflowId: workflow.id,
    resumeSchema: z.toJSONSchema(resumeSchema), // zod 4 writes draft 2020-12
    summary: started.steps?.approval?.suspendPayload?.reason,
  });
} catch (error) {
  if (!(error instanceof DecisionRefused)) throw error;
  emit('refused', { message: error.message, executions }); // the run was never resumed
  await mastra.shutdown?.();
  process.exit(0);
}
const { resumed, result, resume } = answered;
const { status } = resumed ? result : await mastra.getWorkflow('workflow').getWorkflowRunById(run.runId);
emit('result', {
  resumed,
  status,
  result: resumed ? result.result : null,
  request_id: resume?.requestId ?? null,
  state: resume?.state ?? null,
  resume_data: resume?.resumeData ?? null,
  executions,
});
await mastra.shutdown?.();
