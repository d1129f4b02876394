/** asl-validator ships no type declarations; this is the part of its API the tests use (test/synth/stack.test.ts, test/synth/distributed-map.test.ts). */
declare module 'asl-validator' {
  /** Validates an Amazon States Language definition (it fills in defaults, such as QueryLanguage, in place). */
  function validator(definition: unknown): { isValid: boolean; errors: unknown[]; errorsText(separator?: string): string };
  export = validator;
}
