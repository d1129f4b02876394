/**
 * What one sweep of the orphan sweeper found and did (lib/core/sweeper.ts). Its own module, with no imports: the sweeper
 * returns it and the events carry it (events.ts `swept`), and neither of those may import the other (the sweeper
 * reports through the events).
 */

/** What one sweep found and did. */
export interface SweepReport {
  /** Rows in the sparse index this sweep (all of them claimed by construction). */
  readonly claimed: number;
  /** Orphans: unchanged across a full lease. */
  readonly orphans: number;
  /** The jobs re-queued by this sweep (their new runs started first). */
  readonly requeued: string[];
  /** Looked dead but the write found a new owner or fence (a takeover raced us): nothing changed. */
  readonly lostRaces: number;
  /** Renewed (rvn changed) or changed hands since the first sighting. */
  readonly skippedAlive: number;
  /** First sightings, to be checked a lease later. */
  readonly pending: number;
  /** Too many claimed rows looked dead at once (likely our own renewal path, not the holders): re-queued none. */
  readonly storm: boolean;
  /** Orphans left for a later sweep by the rate bound. */
  readonly deferred: number;
  /** Orphans not re-queued because they were re-queued `maxRequeuesPerRun` times already: a person must act. */
  readonly givenUp: string[];
  /** Items read from DynamoDB: index rows + lock items. */
  readonly itemsRead: number;
}
