// A Mastra agent whose `send_report` tool needs approval, its execute wrapped by
// hitl-controlplane/mastra's controlledTool: shared by the node tests here and the hosts the
// live tests (tests/interop/typescript_mastra) run against a real daphne.
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { controlledTool } from 'hitl-controlplane/mastra';
import { z } from 'zod';

import { scriptedModel, text, toolCall } from './scripted.mjs';

export const ARGS = { to: ['dana@example.com'], subject: 'Quarterly numbers', body: 'Attached.' };

/** `sent` lists every run of the tool body; `tool` is the wrapped tool, `agent` the registered agent.
 * `onRun` hears each run as it starts; `seconds` makes the body that slow (a long tool). */
export function mailer(cp, { toolCallId = 'call-1', args = ARGS, onRun = () => {}, seconds = 0 } = {}) {
  const sent = [];
  const tool = createTool(
    controlledTool(cp, {
      id: 'send_report',
      description: 'Send a report by email.',
      inputSchema: z.object({ to: z.array(z.string()), subject: z.string(), body: z.string() }),
      execute: async ({ to, subject }) => {
        sent.push({ to, subject });
        onRun({ to, subject });
        await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
        return { delivered: to.length };
      },
    }),
  );
  const { model, prompts } = scriptedModel([toolCall(toolCallId, 'send_report', args), text('Done.')]);
  const mastra = new Mastra({
    logger: false,
    storage: new InMemoryStore(), // approveToolCall resumes the run from its snapshot
    agents: {
      mailer: new Agent({ id: 'mailer', name: 'mailer', instructions: 'Send mail.', model, tools: { send_report: tool } }),
    },
  });
  return { sent, tool, prompts, agent: mastra.getAgent('mailer') };
}

/** Stream until the run stops for approval: the `tool-call-approval` payload and the run id. */
export async function untilApproval(agent, prompt = 'Send Dana the quarterly numbers.') {
  const stream = await agent.stream(prompt);
  let approval = null;
  for await (const chunk of stream.fullStream) {
    if (chunk.type === 'tool-call-approval') approval = chunk.payload;
  }
  if (approval === null) throw new Error('the stream yielded no tool-call-approval chunk');
  return { approval, runId: stream.runId };
}
