/**
 * A conflict-faithful DynamoDB endpoint: a loopback HTTP proxy in front of DynamoDB Local (JSON protocol, the
 * operation in `X-Amz-Target`). DynamoDB Local serializes every request, so two transactions on one item never
 * collide there; AWS cancels one of them. The proxy applies AWS's documented conflict rules on its side and
 * forwards everything else byte for byte (headers included: DynamoDB Local does not check SigV4 signatures, so a
 * signature over the proxy's Host still passes).
 *
 * Rules (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling):
 *  - An item (table + primary key) is "in a transaction" from the moment the proxy has the TransactWriteItems and
 *    its key schemas, until DynamoDB Local answered it plus `conflictWindowMs` (the caller waits that long too: the
 *    window stands for the time AWS's two-phase commit takes, widened so races happen on two cores).
 *  - Another TransactWriteItems touching such an item (Put, Update, Delete or ConditionCheck) is cancelled without
 *    being forwarded: TransactionCanceledException, reason TransactionConflict at that item's position, None
 *    elsewhere (reason codes: the TransactWriteItems API reference,
 *    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
 *  - A PutItem, UpdateItem or DeleteItem on such an item fails with TransactionConflictException.
 * On demand it also answers as AWS does when a transaction is throttled (cancellation reasons ThrottlingError,
 * ProvisionedThroughputExceeded) or the service fails (500 InternalServerError, 503 ServiceUnavailable,
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html).
 * Not emulated: see the header of test/store/dynamodb-proxy.test.ts.
 *
 * Off (`conflicts: false`, or `conflictWindowMs` 0, and no fault armed) it changes nothing: every request is
 * forwarded and every answer returned as DynamoDB Local gave it. Every request is recorded to `onCall`, including
 * those the proxy answers itself.
 */
import http from 'node:http';
import type net from 'node:net';
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { readBody } from './http-body';
import { prng } from '../core/prng';
import { principalOf, type AwsCall, type CallSink } from './call-log';
import { InfrastructureError } from '../core/errors';

const TARGET_PREFIX = 'DynamoDB_20120810.';
const ERROR_NS = 'com.amazonaws.dynamodb.v20120810#';

// Wire texts as AWS sends them (the TransactWriteItems API reference lists the reason codes and messages).
const CONFLICT_MESSAGE = 'Transaction is ongoing for the item';
const THROTTLING_MESSAGE =
  'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html';
const THROUGHPUT_MESSAGE =
  'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.';
const INTERNAL_MESSAGE = 'Internal server error';
const UNAVAILABLE_MESSAGE = 'DynamoDB is currently unavailable. (This should be a temporary state.)';

/**
 * throttle-cancel / throughput-cancel: a transaction cancelled for capacity (not forwarded). http-500 / http-503:
 * the service failing (not forwarded, unless `applied`). delay: forwarded at once, the answer held back `ms`.
 */
type FaultKind = 'throttle-cancel' | 'throughput-cancel' | 'http-500' | 'http-503' | 'delay';
const FAULT_KINDS: readonly FaultKind[] = ['throttle-cancel', 'throughput-cancel', 'http-500', 'http-503', 'delay'];
const DEFAULT_DELAY_MS = 1000;

interface FaultSpec {
  readonly kind: FaultKind;
  /** How many matching requests get it (default 1). */
  readonly count?: number;
  /** Only requests for this operation (default: TransactWriteItems for the cancellations, any operation otherwise). */
  readonly operation?: string;
  /** Only requests signed with this access key id (a function's principal, lib/local/call-log.ts). */
  readonly principal?: string;
  /** Cancellations: the item whose reason carries the code; the others get None (default 0). */
  readonly item?: number;
  /** 5xx: forward first, so the request takes effect, and then answer the error (an ambiguous outcome). */
  readonly applied?: boolean;
  /** delay: how long the answer is held back (default 1000 ms). */
  readonly ms?: number;
}

interface RandomFaults {
  readonly seed: number;
  /** Per matching request, the probability of each fault. */
  readonly rates: Partial<Record<FaultKind, number>>;
  /** Only these operations (default as in FaultSpec.operation). */
  readonly operations?: readonly string[];
  /** delay: how long an answer is held back (default 1000 ms). */
  readonly delayMs?: number;
}

export interface DynamoDbProxyOptions {
  /** DynamoDB Local's endpoint, e.g. http://127.0.0.1:8000. */
  readonly target: string;
  readonly host?: string; // default 127.0.0.1: loopback only
  readonly port?: number; // default 0: a free port
  /** Emulate transaction conflicts (default true; they also need conflictWindowMs > 0). */
  readonly conflicts?: boolean;
  /** Extra time a transaction's items stay in flight after DynamoDB Local answered (default 0: conflicts off). */
  readonly conflictWindowMs?: number;
  readonly onCall?: CallSink;
  readonly randomFaults?: RandomFaults;
}

export interface DynamoDbProxyStats {
  readonly requests: number;
  readonly forwarded: number;
  /** TransactWriteItems cancelled because an item was in another transaction. */
  readonly transactionConflicts: number;
  /** PutItem / UpdateItem / DeleteItem refused with TransactionConflictException. */
  readonly writeConflicts: number;
  readonly injected: Readonly<Record<FaultKind, number>>;
  /** DescribeTable calls the proxy made to learn key schemas (one per table, then cached). */
  readonly keySchemaLookups: number;
}

export interface DynamoDbProxy {
  readonly endpoint: string;
  readonly port: number;
  inject(fault: FaultSpec): void;
  clearFaults(): void;
  stats(): DynamoDbProxyStats;
  stop(): Promise<void>;
}

interface Upstream {
  readonly status: number;
  readonly headers: http.OutgoingHttpHeaders;
  readonly body: Buffer;
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

type Json = Record<string, unknown>;
type AttributeMap = Record<string, Json>;
/** A table's key attribute names (HASH, then RANGE), and each secondary index's. */
interface KeySchemas {
  readonly table: readonly string[];
  readonly indexes: Readonly<Record<string, readonly string[]>>;
}
const WRITE_KINDS = ['Put', 'Update', 'Delete', 'ConditionCheck'] as const;
type WriteKind = (typeof WRITE_KINDS)[number];
const SINGLE_WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem']);

export async function startDynamoDbProxy(options: DynamoDbProxyOptions): Promise<DynamoDbProxy> {
  const target = new URL(options.target);
  const windowMs = options.conflictWindowMs ?? 0;
  const conflictsOn = options.conflicts !== false && windowMs > 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const inFlight = new Map<string, number>(); // item id -> holding transaction (a counter)
  let nextTransaction = 1;
  const keySchemas = new Map<string, Promise<KeySchemas | undefined>>();
  const armed: { spec: FaultSpec; left: number }[] = [];
  const random = options.randomFaults ? prng(options.randomFaults.seed) : undefined; // seeded: a run's faults replay
  const counts = { requests: 0, forwarded: 0, transactionConflicts: 0, writeConflicts: 0, keySchemaLookups: 0 };
  const injected: Record<FaultKind, number> = { 'throttle-cancel': 0, 'throughput-cancel': 0, 'http-500': 0, 'http-503': 0, delay: 0 };

  const forward = (req: http.IncomingMessage, body: Buffer): Promise<Upstream> =>
    new Promise((resolve, reject) => {
      counts.forwarded++;
      const headers: http.OutgoingHttpHeaders = {};
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers[req.rawHeaders[i]] = req.rawHeaders[i + 1];
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const out: http.OutgoingHttpHeaders = {};
          for (let i = 0; i < res.rawHeaders.length; i += 2) out[res.rawHeaders[i]] = res.rawHeaders[i + 1];
          resolve({ status: res.statusCode ?? 502, headers: out, body: Buffer.concat(chunks) });
        });
        res.on('error', reject);
      });
      up.on('error', reject);
      up.end(body);
    });

  /** The key attribute names of a table and of its indexes (HASH, then RANGE), asked of DynamoDB Local. */
  const keySchemaOf = (table: string): Promise<KeySchemas | undefined> => {
    let known = keySchemas.get(table);
    if (!known) {
      counts.keySchemaLookups++;
      known = describeKeySchema(target, agent, table).then((names) => {
        if (!names) keySchemas.delete(table); // not there (yet): ask again next time
        return names;
      });
      keySchemas.set(table, known);
    }
    return known;
  };

  const itemIdOf = async (table: unknown, attrs: unknown): Promise<string | undefined> => {
    if (typeof table !== 'string' || !isObject(attrs)) return undefined;
    const names = (await keySchemaOf(table))?.table;
    if (!names) return undefined;
    const parts: string[] = [];
    for (const n of names) {
      const v = (attrs as AttributeMap)[n];
      if (!isObject(v)) return undefined; // DynamoDB Local will refuse it; nothing to lock
      parts.push(canonicalKeyValue(v));
    }
    return [table, ...parts].join('\u0000');
  };

  const takeFault = (operation: string, principal: string): FaultSpec | undefined => {
    const i = armed.findIndex((a) => appliesTo(a.spec.kind, a.spec.operation, operation) && (a.spec.principal ?? principal) === principal);
    if (i >= 0) {
      const a = armed[i];
      if (--a.left <= 0) armed.splice(i, 1);
      return a.spec;
    }
    if (random && options.randomFaults) {
      const { rates, operations, delayMs } = options.randomFaults;
      for (const kind of FAULT_KINDS) {
        const rate = rates[kind] ?? 0;
        if (rate <= 0) continue;
        const matches = operations ? operations.includes(operation) && appliesTo(kind, operation, operation) : appliesTo(kind, undefined, operation);
        if (matches && random() < rate) return { kind, ms: delayMs };
      }
    }
    return undefined;
  };

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    counts.requests++;
    const body = await readBody(req);
    const amzTarget = String(req.headers['x-amz-target'] ?? '');
    const operation = amzTarget.startsWith(TARGET_PREFIX) ? amzTarget.slice(TARGET_PREFIX.length) : amzTarget;
    const input = parseJson(body);
    const authorization = req.headers.authorization;
    const principal = principalOf(authorization);
    if (options.onCall) options.onCall(await withPartitionKeys(callOf(principal, operation, input), operation, input, keySchemaOf));
    if (operation === 'CreateTable' || operation === 'DeleteTable') keySchemas.delete(String(input?.TableName));

    const fault = takeFault(operation, principal);
    if (fault) injected[fault.kind]++;
    if (fault && answersUnforwarded(fault)) return answer(res, faultAnswer(fault, input));

    let locked: string[] = [];
    let holder = 0;
    if (conflictsOn && operation === 'TransactWriteItems') {
      const ids = await transactionItemIds(input);
      // From here to the lock, nothing awaits: the check and the lock are one step.
      const reasons = ids.map((id) => (id !== undefined && inFlight.has(id) ? 'TransactionConflict' : 'None'));
      if (reasons.includes('TransactionConflict')) {
        counts.transactionConflicts++;
        return answer(res, cancellation(reasons.map((code) => (code === 'None' ? { Code: 'None' } : { Code: code, Message: CONFLICT_MESSAGE }))));
      }
      holder = nextTransaction++;
      locked = ids.filter((id): id is string => id !== undefined);
      for (const id of locked) inFlight.set(id, holder);
    } else if (conflictsOn && SINGLE_WRITES.has(operation)) {
      const id = await itemIdOf(input?.TableName, operation === 'PutItem' ? input?.Item : input?.Key);
      if (id !== undefined && inFlight.has(id)) {
        counts.writeConflicts++;
        return answer(res, { status: 400, body: JSON.stringify({ __type: `${ERROR_NS}TransactionConflictException`, message: CONFLICT_MESSAGE }) });
      }
    }

    let up: Upstream;
    try {
      up = await forward(req, body);
      if (locked.length > 0) await sleep(windowMs);
    } finally {
      for (const id of locked) if (inFlight.get(id) === holder) inFlight.delete(id);
    }
    if (fault?.kind === 'delay') await sleep(fault.ms ?? DEFAULT_DELAY_MS); // a slow answer, not a long transaction
    if (fault && isHttpFault(fault.kind)) return answer(res, faultAnswer(fault, input)); // applied, then failed
    res.writeHead(up.status, up.headers);
    res.end(up.body);
  }

  async function transactionItemIds(input: Json | undefined): Promise<(string | undefined)[]> {
    const items = Array.isArray(input?.TransactItems) ? (input.TransactItems as unknown[]) : [];
    return Promise.all(
      items.map(async (entry) => {
        const w = writeOf(entry);
        if (!w) return undefined;
        return itemIdOf(w.action.TableName, w.kind === 'Put' ? w.action.Item : w.action.Key);
      }),
    );
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy()); // DynamoDB Local unreachable: the caller sees a dropped connection
  });
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      agent.destroy();
      const where = `${options.host ?? '127.0.0.1'}:${options.port ?? 0}`;
      reject(
        new InfrastructureError(
          e.code === 'EADDRINUSE'
            ? `DynamoDB endpoint: port ${where} is already in use`
            : `DynamoDB endpoint: cannot listen on ${where}: ${e.message}`,
          { cause: e },
        ),
      );
    });
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port, address } = server.address() as net.AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;

  return {
    endpoint: `http://${host}:${port}`,
    port,
    inject(fault) {
      const count = fault.count ?? 1;
      if (count > 0) armed.push({ spec: fault, left: count });
    },
    clearFaults() {
      armed.length = 0;
    },
    stats: () => ({ ...counts, injected: { ...injected } }),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy(); // kept-alive client connections would hold close() open
        agent.destroy();
      }),
  };
}

// ---------------------------------------------------------------- wire shapes

function answer(res: http.ServerResponse, a: Answer): void {
  res.writeHead(a.status, {
    'Content-Type': 'application/x-amz-json-1.0',
    'Content-Length': Buffer.byteLength(a.body),
    'x-amzn-RequestId': requestId(),
    'x-amz-crc32': String(crc32(a.body)),
  });
  res.end(a.body);
}

/** TransactionCanceledException as AWS (and DynamoDB Local) write it: __type, CancellationReasons, Message. */
function cancellation(reasons: readonly { Code: string; Message?: string }[]): Answer {
  return {
    status: 400,
    body: JSON.stringify({
      __type: `${ERROR_NS}TransactionCanceledException`,
      CancellationReasons: reasons,
      Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
    }),
  };
}

function faultAnswer(fault: FaultSpec, input: Json | undefined): Answer {
  switch (fault.kind) {
    case 'delay':
      throw new Error('a delay is not an answer'); // answersUnforwarded() keeps it from here
    case 'http-500':
      return { status: 500, body: JSON.stringify({ __type: `${ERROR_NS}InternalServerError`, message: INTERNAL_MESSAGE }) };
    case 'http-503':
      return { status: 503, body: JSON.stringify({ __type: `${ERROR_NS}ServiceUnavailable`, message: UNAVAILABLE_MESSAGE }) };
    case 'throttle-cancel':
    case 'throughput-cancel': {
      const n = Math.max(1, Array.isArray(input?.TransactItems) ? input.TransactItems.length : 1);
      const at = Math.min(Math.max(0, fault.item ?? 0), n - 1);
      const reason =
        fault.kind === 'throttle-cancel'
          ? { Code: 'ThrottlingError', Message: THROTTLING_MESSAGE }
          : { Code: 'ProvisionedThroughputExceeded', Message: THROUGHPUT_MESSAGE };
      return cancellation(Array.from({ length: n }, (_, i) => (i === at ? reason : { Code: 'None' })));
    }
  }
}

/** AWS request ids are 52 upper-case letters and digits; DynamoDB Local's are UUIDs. Either parses. */
function requestId(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return Array.from(randomBytes(52), (b) => alphabet[b % alphabet.length]).join('');
}

// ---------------------------------------------------------------- request parsing

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseJson(body: Buffer): Json | undefined {
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function writeOf(entry: unknown): { kind: WriteKind; action: Json } | undefined {
  if (!isObject(entry)) return undefined;
  for (const kind of WRITE_KINDS) if (isObject(entry[kind])) return { kind, action: entry[kind] as Json };
  return undefined;
}

function callOf(principal: string, operation: string, input: Json | undefined): AwsCall {
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const call: { -readonly [K in keyof AwsCall]: AwsCall[K] } = { principal, service: 'dynamodb', operation };
  const table = str(input?.TableName);
  const index = str(input?.IndexName);
  if (table !== undefined) call.table = table;
  if (index !== undefined) call.index = index;
  if (operation === 'TransactWriteItems' && Array.isArray(input?.TransactItems)) {
    call.items = input.TransactItems.flatMap((e: unknown) => {
      const w = writeOf(e);
      const t = str(w?.action.TableName);
      return w && t !== undefined ? [{ operation: w.kind, table: t }] : [];
    });
  }
  // TransactGetItems: its items are Gets, which AwsCall's item list cannot name yet; recorded without items.
  return call;
}

/**
 * The call with the partition key value each of its items names, as DynamoDB gives it to IAM (`dynamodb:LeadingKeys`,
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html): an item's from its
 * Key (or a Put's Item), a Query's from its key condition on the table's or the index's partition key. The key
 * schemas come from DescribeTable (cached); a table that cannot be described leaves the value out, unless the Key has
 * a single attribute (then it is the partition key).
 */
async function withPartitionKeys(
  call: AwsCall,
  operation: string,
  input: Json | undefined,
  schemaOf: (table: string) => Promise<KeySchemas | undefined>,
): Promise<AwsCall> {
  const valueOf = async (table: string | undefined, action: Json, put: boolean): Promise<string | undefined> => {
    const attrs = put ? action.Item : action.Key;
    if (table === undefined || !isObject(attrs)) return undefined;
    const hash = (await schemaOf(table))?.table[0] ?? (!put && Object.keys(attrs).length === 1 ? Object.keys(attrs)[0] : undefined);
    return hash === undefined ? undefined : scalarOf((attrs as AttributeMap)[hash]);
  };
  if (operation === 'TransactWriteItems' && call.items) {
    const entries = Array.isArray(input?.TransactItems)
      ? (input.TransactItems as unknown[]).map(writeOf).filter((w) => typeof w?.action.TableName === 'string')
      : [];
    const items = await Promise.all(
      call.items.map(async (item, i) => {
        const w = entries[i];
        const pk = w ? await valueOf(item.table, w.action, w.kind === 'Put') : undefined;
        return pk === undefined ? item : { ...item, partitionKey: pk };
      }),
    );
    return { ...call, items };
  }
  if (input === undefined || call.table === undefined) return call;
  let pk: string | undefined;
  if (operation === 'GetItem' || operation === 'UpdateItem' || operation === 'DeleteItem' || operation === 'PutItem') {
    pk = await valueOf(call.table, input, operation === 'PutItem');
  } else if (operation === 'Query') {
    const schemas = await schemaOf(call.table);
    const hash = call.index === undefined ? schemas?.table[0] : schemas?.indexes[call.index]?.[0];
    if (hash !== undefined) pk = queryPartitionKey(input, hash);
  }
  return pk === undefined ? call : { ...call, partitionKey: pk };
}

/** The value a Query's key condition sets its partition key attribute `hash` equal to (expression or legacy KeyConditions). */
function queryPartitionKey(input: Json, hash: string): string | undefined {
  const names = isObject(input.ExpressionAttributeNames) ? (input.ExpressionAttributeNames as Record<string, string>) : {};
  const values = isObject(input.ExpressionAttributeValues) ? (input.ExpressionAttributeValues as AttributeMap) : {};
  if (typeof input.KeyConditionExpression === 'string') {
    for (const m of input.KeyConditionExpression.matchAll(/([#\w.-]+)\s*=\s*(:[\w]+)/g)) {
      if ((names[m[1]] ?? m[1]) === hash) return scalarOf(values[m[2]]);
    }
    return undefined;
  }
  const legacy = isObject(input.KeyConditions) ? (input.KeyConditions as Record<string, { AttributeValueList?: Json[] }>)[hash] : undefined;
  return scalarOf(legacy?.AttributeValueList?.[0]);
}

/** A key attribute's value as IAM compares it: the string, the number's digits, or the binary's base64. */
function scalarOf(v: unknown): string | undefined {
  if (!isObject(v)) return undefined;
  for (const t of ['S', 'N', 'B'] as const) if (typeof v[t] === 'string') return v[t];
  return undefined;
}

/**
 * One spelling per key value: numbers compare by value in DynamoDB ("1.50" and "1.5" are one key), strings and
 * binaries by their bytes.
 */
function canonicalKeyValue(v: Json): string {
  if (typeof v.S === 'string') return `S:${v.S}`;
  if (typeof v.N === 'string') return `N:${canonicalNumber(v.N)}`;
  if (typeof v.B === 'string') return `B:${v.B}`;
  return JSON.stringify(v);
}

function canonicalNumber(n: string): string {
  const m = /^\s*([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*$/.exec(n);
  if (!m) return n;
  const digits = `${m[2]}${m[3] ?? ''}`;
  const lead = digits.search(/[1-9]/);
  if (lead < 0) return '0';
  const exp = Number(m[4] ?? 0) + m[2].length - lead; // value = 0.<significant> × 10^exp
  const significant = digits.slice(lead).replace(/0+$/, '');
  return `${m[1] === '-' ? '-' : ''}${significant}e${exp}`;
}

function appliesTo(kind: FaultKind, wanted: string | undefined, operation: string): boolean {
  if (isHttpFault(kind) || kind === 'delay') return wanted === undefined || wanted === operation;
  // Cancellation reasons exist only for transactions.
  return (wanted ?? 'TransactWriteItems') === operation && (operation === 'TransactWriteItems' || operation === 'TransactGetItems');
}

/** The proxy answers these itself, and the request never reaches DynamoDB Local. */
function answersUnforwarded(fault: FaultSpec): boolean {
  if (fault.kind === 'delay') return false;
  return !(isHttpFault(fault.kind) && fault.applied);
}

function isHttpFault(kind: FaultKind): boolean {
  return kind === 'http-500' || kind === 'http-503';
}

// ---------------------------------------------------------------- helpers

async function describeKeySchema(target: URL, agent: http.Agent, table: string): Promise<KeySchemas | undefined> {
  const body = JSON.stringify({ TableName: table });
  const text = await new Promise<string | undefined>((resolve) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path: '/',
        agent,
        headers: {
          'Content-Type': 'application/x-amz-json-1.0',
          'X-Amz-Target': `${TARGET_PREFIX}DescribeTable`,
          // The proxy's own key (DynamoDB Local takes letters and digits only), not the caller's: this lookup is the
          // stand-in's, not a call the caller made, and the IAM proof reads the call log by principal. DynamoDB Local
          // runs with -sharedDb, so every key sees the same tables.
          Authorization: 'AWS4-HMAC-SHA256 Credential=DynamoDbProxy/19700101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
          'Content-Length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(res.statusCode === 200 ? Buffer.concat(chunks).toString('utf8') : undefined));
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('error', () => resolve(undefined));
    req.end(body);
  });
  type Schema = { AttributeName: string; KeyType: string }[];
  type Index = { IndexName: string; KeySchema: Schema };
  const described = (
    parseJson(Buffer.from(text ?? '')) as
      { Table?: { KeySchema?: Schema; GlobalSecondaryIndexes?: Index[]; LocalSecondaryIndexes?: Index[] } } | undefined
  )?.Table;
  if (!Array.isArray(described?.KeySchema)) return undefined;
  const order = (t: string) => (t === 'HASH' ? 0 : 1);
  const names = (schema: Schema) => [...schema].sort((a, b) => order(a.KeyType) - order(b.KeyType)).map((k) => k.AttributeName);
  const indexes = [...(described.GlobalSecondaryIndexes ?? []), ...(described.LocalSecondaryIndexes ?? [])];
  return { table: names(described.KeySchema), indexes: Object.fromEntries(indexes.map((i) => [i.IndexName, names(i.KeySchema)])) };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
