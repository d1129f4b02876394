/**
 * Every handler of FencedJob's workflow and sweeper by name, made from one runtime source: the name is the
 * function's FENCEPOST_HANDLER variable and its entry file (lambda/<name>.ts, which exports `handler` made from its
 * own environment). The local runner's source mode makes them from a runtime of its own (lib/local/workflow.ts). The
 * chunk function is the job's own (fencedChunkHandler), not one of these.
 */
import { claimStep } from './claim';
import { completeStep } from './complete';
import { observeStep } from './observe';
import { prepareStep } from './prepare';
import { raiseStep } from './raise';
import { releaseStep } from './release';
import type { RuntimeSource } from './runtime';
import { sweepSightStep } from './sweep-sight';
import { sweepVerifyStep } from './sweep-verify';

/**
 * The handlers, made from `runtime`: each builds nothing until its first invocation asks the source.
 * @param runtime - where each handler gets its runtime (lazily: a warm function's one)
 */
export function makeHandlers(runtime: RuntimeSource) {
  return {
    prepare: prepareStep(runtime),
    observe: observeStep(runtime),
    claim: claimStep(runtime),
    raise: raiseStep(runtime),
    complete: completeStep(runtime),
    release: releaseStep(runtime),
    'sweep-sight': sweepSightStep(runtime),
    'sweep-verify': sweepVerifyStep(runtime),
  } as const;
}

/** The name of one of FencedJob's own handlers (its FENCEPOST_HANDLER and its module lambda/<name>.ts). */
export type HandlerName = 'prepare' | 'observe' | 'claim' | 'raise' | 'complete' | 'release' | 'sweep-sight' | 'sweep-verify';

// The list above is makeHandlers' keys, no more and no fewer: a handler added or renamed there fails to compile here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const handlerNamesMatch: Same<HandlerName, keyof ReturnType<typeof makeHandlers>> = true;
void handlerNamesMatch;

/** The fenced workflow's own handlers (lib/constructs/fenced-workflow.ts): not the sweeper's. */
export type FencedHandlerName = Exclude<HandlerName, 'sweep-sight' | 'sweep-verify'>;
