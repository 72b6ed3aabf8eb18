// A scripted model for @openai/agents (the SDK ships no mock of its `Model` interface in
// `@openai/agents` itself): the first turn calls `transfer_funds` with fixed arguments and
// call id; once a tool result is in its input it answers with the text it read, so a test
// can see exactly what the model was told (the tool's result, the reviewer's feedback, or
// "Not run: already executed (...)").
import { Usage } from '@openai/agents';

export const CALL_ID = 'call_7';
export const ARGUMENTS = { amount: 90, to: 'acme' };

export function toolOutputText(item) {
  const output = item.output;
  if (typeof output === 'string') return output;
  if (output && typeof output.text === 'string') return output.text;
  return JSON.stringify(output);
}

export class ScriptedModel {
  constructor({ callId = CALL_ID, args = ARGUMENTS } = {}) {
    this.callId = callId;
    this.args = args;
    /** The tool results the model was shown, in order. */
    this.read = [];
  }

  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const results = items.filter((item) => item.type === 'function_call_result' && item.callId === this.callId);
    if (results.length === 0) {
      return {
        usage: new Usage(),
        output: [
          {
            type: 'function_call',
            id: `fc_${this.callId}`,
            callId: this.callId,
            name: 'transfer_funds',
            status: 'completed',
            arguments: JSON.stringify(this.args),
          },
        ],
      };
    }
    const text = toolOutputText(results[results.length - 1]);
    this.read.push(text);
    return {
      usage: new Usage(),
      output: [
        {
          type: 'message',
          id: `msg_${this.callId}`,
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: `I read: ${text}` }],
        },
      ],
    };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error('the scripted model does not stream');
  }
}
