// The few control plane calls a Mastra host makes (DESIGN.md "Agent-facing contract"),
// on Node's own fetch: Mastra's raw protocols, without the package (docs/agents.md shows hitl-controlplane/mastra).
// CONTROLPLANE_URL and CONTROLPLANE_TOKEN come from the environment.

const base = process.env.CONTROLPLANE_URL;
const token = process.env.CONTROLPLANE_TOKEN;

async function call(method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${data.code}: ${data.message}`);
  return data;
}

export const submitAction = body => call('POST', '/api/v1/actions/', body);
export const submitPlan = body => call('POST', '/api/v1/plans/', body);
export const submitSuspension = body => call('POST', '/api/v1/suspensions/', body);

/** Long-poll the request's resume endpoint until a decision lands: `{state, resume_data, tool_result}`. */
export async function waitForDecision(requestId) {
  for (;;) {
    const resume = await call('GET', `/api/v1/requests/${requestId}/resume/?wait=25`);
    if (resume.decided) return resume;
  }
}

/** One JSON line on stdout: what the test reads (the host's progress and its result). */
export function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}
