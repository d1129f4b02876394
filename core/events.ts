/**
 * Events a holder emits as it works: what `--events` prints one JSON line each, and what the story replay and the
 * tests read. Each is stamped with the worker and its monotonic milliseconds (comparable only within one process).
 */
import type { Clock } from './clock';

export type EventName =
  | 'observe'
  | 'claim'
  | 'renew'
  | 'renew-failed'
  | 'lease-lost'
  | 'fence-raised'
  | 'manifest-raised'
  | 'batch-committed'
  | 'batch-rejected'
  | 'chunk-committed'
  | 'commit-rejected'
  | 'completed'
  | 'already-done'
  | 'released'
  | 'release-failed'
  | 'swept'
  | 'sweeper-storm'
  | 'requeued';

export interface FencepostEvent {
  readonly event: EventName;
  readonly worker: string;
  readonly monoMs: number;
  readonly token?: number;
  readonly [field: string]: unknown;
}

export type EventListener = (e: FencepostEvent) => void;

export class Events {
  private readonly listeners: EventListener[] = [];
  constructor(
    readonly worker: string,
    private readonly clock: Clock,
  ) {}

  on(listener: EventListener): this {
    this.listeners.push(listener);
    return this;
  }

  emit(event: EventName, fields: { token?: number; [field: string]: unknown } = {}): void {
    this.forward({ event, worker: this.worker, monoMs: Math.round(this.clock.monotonicMs()), ...fields });
  }

  /** Pass on an event already stamped elsewhere in this process (the local workflow's handlers). */
  forward(e: FencepostEvent): void {
    for (const l of this.listeners) l(e);
  }
}
