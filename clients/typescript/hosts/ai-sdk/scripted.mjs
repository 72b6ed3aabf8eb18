// A scripted model for the AI SDK, on `ai/test`'s MockLanguageModelV4: the first turn calls
// `transfer_funds` with fixed input and call id; once the call's result (or its denial) is in
// the prompt it answers with the text it read, so a test sees exactly what the model was told.
import { MockLanguageModelV4 } from 'ai/test';

export const CALL_ID = 'call_7';
export const INPUT = { amount: 90, to: 'acme' };

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

export function outputText(output) {
  switch (output?.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'execution-denied':
      return output.reason ?? '(denied)';
    default:
      return JSON.stringify(output?.value ?? output);
  }
}

export function scriptedModel({ callId = CALL_ID, input = INPUT } = {}) {
  const read = [];
  const generate = async ({ prompt }) => {
      const results = prompt
        .filter((message) => message.role === 'tool')
        .flatMap((message) => message.content)
        .filter((part) => part.type === 'tool-result' && part.toolCallId === callId);
      if (results.length === 0) {
        return {
          content: [{ type: 'tool-call', toolCallId: callId, toolName: 'transfer_funds', input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        };
      }
      const text = outputText(results[results.length - 1].output);
      read.push(text);
      return {
        content: [{ type: 'text', text: `I read: ${text}` }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage,
        warnings: [],
      };
  };
  // streamText: the same turn as stream parts.
  const stream = async (options) => {
    const turn = await generate(options);
    const parts = [{ type: 'stream-start', warnings: [] }];
    for (const part of turn.content) {
      if (part.type === 'text') {
        parts.push({ type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: part.text });
        parts.push({ type: 'text-end', id: 't1' });
      } else parts.push(part);
    }
    parts.push({ type: 'finish', finishReason: turn.finishReason, usage: turn.usage });
    return {
      stream: new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      }),
    };
  };
  return { model: new MockLanguageModelV4({ doGenerate: generate, doStream: stream }), read };
}
