/**
 * The items an election and a handover keep, by key: in the lock table the role item, its candidates and the writer
 * lease; in a ledger's table the fence item and its entries. In one place, for the election's code and for the grants
 * that reach exactly these keys (lib/constructs/election-grants.ts).
 */

const pad = (n: number) => String(n).padStart(12, '0');

/** The role item's key. */
export const roleKey = (role: string) => `election/${role}`;
/** A candidate item's key: the role's, then the sequence number in 12 digits. */
export const candidateKey = (role: string, seq: number) => `${roleKey(role)}/${pad(seq)}`;
/** The fence item of the ledger a role's leaders write (in the job table): entries carry the leader's epoch. */
export const ledgerKey = (role: string) => `ledger/${role}`;
/** The lock item that says who the single writer of `role` is. */
export const writerKey = (role: string) => `writer/${role}`;
/** The fence item of the ledger a role's single writer writes (in the job table). */
export const writerLedgerKey = (role: string) => `ledger/writer/${role}`;
/** The key of a ledger entry: the fence item's key and the version, zero-padded so entries sort in version order. */
export function entryKey(fenceKey: string, version: number): string {
  return `${fenceKey}#${pad(version)}`;
}

/** Every problem with a role or candidate name (they become parts of item keys). */
export function nameProblems(kind: 'role' | 'candidate', name: string): string[] {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) return [`${kind} must be 1-64 characters of A-Z a-z 0-9 . _ -, got ${JSON.stringify(name)}`];
  return [];
}
