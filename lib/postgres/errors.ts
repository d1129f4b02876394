/**
 * The one error of its own the PostgreSQL fence throws; the others are the core's (FencedOutError, FenceNotRaisedError,
 * ConfigError), so a holder catches the same errors whatever store its fence is in.
 */
import { FencepostError } from '../core/errors';

/**
 * A statement of the work failed and the work went on (it caught the error): PostgreSQL had aborted the transaction,
 * and its COMMIT rolled it back without an error of its own. Nothing of the transaction was written. A bug in the
 * work: let a failed statement's error leave the work, or use a SAVEPOINT to go on after it.
 */
export class TransactionAbortedError extends FencepostError {
  constructor(
    /** The fence whose transaction it was. */
    readonly resource: string,
    /** The token the transaction carried. */
    readonly token: number,
  ) {
    super(
      `the fenced transaction at '${resource}' (token ${token}) was aborted by a failed statement the work went on after: COMMIT rolled it back, nothing was written`,
    );
  }
}
