/**
 * Loaded into every test file's process by the batch runner (test/support/runner.ts, with --import). Once a file's
 * tests have all ended, its process should exit by itself; if something it started is still open (a campaign still
 * polling, a child's pipe, a server), the file would hold the whole run open. After `FENCEPOST_TEST_LINGER_MS` the
 * guard names what is still open and exits 1, which the runner reports as that file failing.
 *
 * The timer is unref'd: a file that ends cleanly exits at once, never waiting for it. A timer that fires late was
 * held up by synchronous work on the file's own thread (an `after` hook removing a large temporary folder with
 * rmSync), not by something left open: the guard then waits its linger once more from that moment, so a slow
 * machine's cleanup is not reported as a leak while a real leak still is.
 */
import { after } from 'node:test';

const lingerMs = Number(process.env.FENCEPOST_TEST_LINGER_MS ?? 30_000);
/** Later than this past its time, a timer was held up by synchronous work, not by the scheduling of a busy machine. */
const LATE_MS = Math.min(1_000, lingerMs / 10);

// Only in a test file's process: the runner that starts them loads this too, and has no tests of its own.
if (process.env.NODE_TEST_CONTEXT !== undefined) {
  const arm = () => {
    const armedAt = performance.now();
    setTimeout(() => {
      if (performance.now() - armedAt > lingerMs + LATE_MS) return arm();
      process.stderr.write(
        `\nthis file's tests have ended, but ${lingerMs} ms later its process is still running; still open: ${process.getActiveResourcesInfo().join(', ')}\n`,
      );
      process.exit(1);
    }, lingerMs).unref();
  };
  after(arm);
}
