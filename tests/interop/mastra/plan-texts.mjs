// Mastra's own submit_plan tool, resumed once per stdin line (a JSON resume_data): one
// JSON line out per line in, the text the tool gives the model (its output's `content`).
// tests/interop/test_mastra.py compares it with our tool_result for generated feedback.
import { createInterface } from 'node:readline';

import { submitPlanTool } from '@mastra/core/harness';

for await (const line of createInterface({ input: process.stdin })) {
  const resumeData = JSON.parse(line);
  const output = await submitPlanTool.execute({ path: resumeData.path ?? 'plan.md' }, { agent: { resumeData } });
  process.stdout.write(JSON.stringify(output.content) + '\n');
}
