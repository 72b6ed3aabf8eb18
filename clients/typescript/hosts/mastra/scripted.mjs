// A scripted language model (ai/test's MockLanguageModelV2, no network): each call
// answers with the next step of `script`, and every prompt it received is kept, so a
// test can read what the model was told (the tool results) on its next turn.
import { MockLanguageModelV2, convertArrayToReadableStream } from 'ai/test';

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

export const toolCall = (toolCallId, toolName, args) => [
  { type: 'tool-call', toolCallId, toolName, input: JSON.stringify(args) },
  { type: 'finish', finishReason: 'tool-calls', usage },
];

export const text = words => [
  { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: words }, { type: 'text-end', id: 't' },
  { type: 'finish', finishReason: 'stop', usage },
];

export function scriptedModel(script) {
  const prompts = [];
  const model = new MockLanguageModelV2({
    doStream: async ({ prompt }) => {
      prompts.push(prompt);
      const step = script[Math.min(prompts.length, script.length) - 1];
      return { stream: convertArrayToReadableStream([{ type: 'stream-start', warnings: [] }, ...step]) };
    },
  });
  return { model, prompts };
}

/** The tool result the model was last shown for `toolCallId` (as the provider receives it). */
export function toolResultSeen(prompts, toolCallId) {
  for (const prompt of [...prompts].reverse()) {
    for (const message of prompt) {
      if (message.role !== 'tool') continue;
      const part = message.content.find(p => p.type === 'tool-result' && p.toolCallId === toolCallId);
      if (part) return part.output;
    }
  }
  return null;
}
