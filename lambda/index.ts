/** Every billing handler by name: the name is the function's FENCEPOST_HANDLER variable and its entry file. */
import { handler as chunk } from './chunk';
import { handler as claim } from './claim';
import { handler as complete } from './complete';
import { handler as observe } from './observe';
import { handler as prepare } from './prepare';
import { handler as raise } from './raise';
import { handler as release } from './release';
import { handler as sweepSight } from './sweep-sight';
import { handler as sweepVerify } from './sweep-verify';

export const handlers = { prepare, observe, claim, raise, chunk, complete, release, 'sweep-sight': sweepSight, 'sweep-verify': sweepVerify } as const;
export type HandlerName = keyof typeof handlers;

/** The billing workflow's handlers (the sweeper has its own state machine). */
export type BillingHandlerName = Exclude<HandlerName, 'sweep-sight' | 'sweep-verify'>;
