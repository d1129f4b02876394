/** The epoch ledger's store on DynamoDB, built from the clients as `awsStores` builds the others. */
import type { Clients } from '../core/aws/clients';
import { DynamoLedgerStore } from '../core/aws/ledger-store';
import type { LedgerStore } from '../core/store/ledger';

/**
 * The ledgers of one DynamoDB table (partition key `pk`, a string): each ledger's fence item and its entries side by
 * side in it. The job table of `fencepost` will do (`tableNames(prefix).jobs`), or a table of your own.
 * @param clients - the document client: `awsClients()` or `localClients(...)`
 * @param table - the table's name
 */
export function awsLedgerStore(clients: Pick<Clients, 'ddb'>, table: string): LedgerStore {
  return new DynamoLedgerStore(clients.ddb, table);
}
