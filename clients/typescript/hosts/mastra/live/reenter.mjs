// A second process entering the same tool call (a run restored elsewhere): the wrapped tool
// finds the request by its key, and the handshake answers instead of running. TOOL_CALL_ID
// names the call.
import { ControlPlane, DecisionRefused } from 'hitl-controlplane';

import { ARGS, mailer } from '../mailer.mjs';
import { emit } from './emit.mjs';

const toolCallId = process.env.TOOL_CALL_ID ?? 'call-1';
const { tool, sent } = mailer(new ControlPlane({ pollWait: 5 }), { toolCallId });
try {
  emit('reentered', { result: await tool.execute(ARGS, { agent: { agentId: 'mailer', toolCallId } }), sent });
} catch (error) {
  if (!(error instanceof DecisionRefused)) throw error;
  emit('refused', { message: error.message, sent });
}
