/** A bounded wait for the tests: a promise that may never settle must fail the test, naming what did not happen. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  const late = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms).unref());
  return Promise.race([promise, late]);
}
