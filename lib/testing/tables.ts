/**
 * Your own tables, written plainly: what a DynamoDB DocumentClient's PutCommand, GetCommand, UpdateCommand and
 * DeleteCommand do, on the memory job store (lib/testing/job-store.ts keeps DynamoDB's rules for them). A write here
 * goes around the fence: nothing refuses it from a holder whose lease has passed. In `exploreJob` each call is a step
 * of the scheduler, and the check "no holder acts past its stop time" watches the writes.
 */
import type { MemoryJobStore, StoredItem } from './job-store';

/** Plain reads and writes of your own tables, one DynamoDB call each, none of them fenced. */
export interface PlainTables {
  /** PutItem: the item replaces the one with its key, whole, or creates it. Its key attribute is the table's (`pk` unless `keys` says). */
  put(table: string, item: Readonly<Record<string, unknown>>): Promise<void>;
  /** GetItem, strongly consistent: the item with this key (`{ pk: 'order#1' }`), or undefined. */
  get(table: string, key: Readonly<Record<string, unknown>>): Promise<StoredItem | undefined>;
  /** UpdateItem with `SET` of each attribute of `set`: creates the item if it is absent. */
  update(table: string, key: Readonly<Record<string, unknown>>, set: Readonly<Record<string, unknown>>): Promise<void>;
  /** DeleteItem: the item with this key is gone (an absent one too). */
  delete(table: string, key: Readonly<Record<string, unknown>>): Promise<void>;
}

/** The plain tables on `store`, each table's partition key named by `keys` (`pk` for a table it does not name). */
export function plainTables(store: MemoryJobStore, keys: Readonly<Record<string, string>> = {}): PlainTables {
  return {
    put: (table, item) => store.putItem(table, keys[table] ?? 'pk', item),
    get: (table, key) => store.getItem(table, key),
    update: (table, key, set) => store.updateItem(table, key, set),
    delete: (table, key) => store.deleteItem(table, key),
  };
}
