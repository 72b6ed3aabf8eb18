// One JSON line on stdout per step: what tests/interop/typescript_mastra reads.
export function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}
