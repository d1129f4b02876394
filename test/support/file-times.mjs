// A second reporter for `npm test` (test/support/runner.ts): one JSON line per top-level test, with its file and
// duration, so the run can say which files took its minutes (test/run.ts prints the slowest).
export default async function* fileTimes(source) {
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0)
      yield `${JSON.stringify({ file: event.data.file, ms: event.data.details?.duration_ms ?? 0 })}\n`;
  }
}
