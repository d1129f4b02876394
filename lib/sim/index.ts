/**
 * The lease simulator (docs/SIMULATOR.md). `SCENARIOS` are the reference's traces, each checking its numbers computed
 * from its inputs: what Fencepost implements runs on the real code (runJob, the lease, the fences, the sweeper,
 * election, handover, the restore bump) on the in-memory stores and virtual time; what it does not runs on a
 * deterministic discrete-event model with no I/O, a virtual true time and seeded randomness.
 * `whatIf` and `sweepGrid` answer an operator's questions about a lease, renewal period, margin, pauses, crashes and
 * clocks: any overlap of two holders, writes the fence refused, invoices written twice with and without the fence,
 * the longest time with no owner, and the earliest safe takeover.
 *
 * What it is not: a model of your deployment. The models (the etcd-style lock service, Redis, Redlock, the clock-comparing
 * claim rules) are small and named after the reference's words, each leaving out what its file says (docs/SIMULATOR.md
 * "The models").
 *
 * @packageDocumentation
 */
export { SCENARIOS } from './scenarios/index';
export type { Check, Scenario, ScenarioInput, ScenarioResult } from './scenario';
export type { SimRow, TimelineMark } from './engine';
export { CLAIM_RULES, type ClaimRule } from './lock-item';
export { WHAT_IF_DEFAULTS, sweepGrid, whatIf, type SweepAxis, type WhatIfAnswers, type WhatIfResult, type WhatIfSettings } from './what-if';
