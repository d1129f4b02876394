/**
 * What the local endpoints tell a caller of every AWS call they answer, and who made it. In the local workflow each
 * function runs with its own access key id (the function's CloudFormation logical id), which every SigV4 request
 * carries in its Authorization header, as AWS identifies a caller.
 *
 * The endpoints report the API facts (operation, table, index, partition key, bucket, key) to the sink they are
 * given, and keep nothing themselves. What a sink does with them is its owner's: the repository's IAM proof appends
 * them to a file and evaluates each against the caller's role policy as synthesized (verify/proofs/call-log.ts).
 */

export interface AwsCall {
  /** The access key id of the request's credentials (SigV4 `Credential=<id>/...`); `anonymous` if unsigned. */
  readonly principal: string;
  readonly service: 'dynamodb' | 's3' | 'lambda' | 'states';
  /** The API operation as AWS names it: PutItem, TransactWriteItems, GetObject, ListObjectsV2, Invoke, StartExecution. */
  readonly operation: string;
  readonly table?: string;
  readonly index?: string;
  readonly bucket?: string;
  readonly key?: string;
  /**
   * DynamoDB: the partition key value the request names (an item's, or a Query's on the table or index it reads), as
   * IAM's `dynamodb:LeadingKeys` carries it; absent when the endpoint could not tell (a table it could not describe).
   */
  readonly partitionKey?: string;
  /** A transaction's items: each is authorized on its own (a Put needs dynamodb:PutItem on its table, and so on). */
  readonly items?: readonly {
    readonly operation: 'Put' | 'Update' | 'Delete' | 'ConditionCheck' | 'Get';
    readonly table: string;
    /** The item's partition key value, as for a single-item call. */
    readonly partitionKey?: string;
  }[];
  /** Lambda Invoke: the function's name or ARN; StartExecution: the state machine's ARN. */
  readonly target?: string;
  /**
   * S3: the conditional-write headers the request carried (If-Match, If-None-Match): a bucket policy can require them
   * (the s3:if-match and s3:if-none-match condition keys; lib/constructs/manifest-bucket.ts).
   */
  readonly conditions?: { readonly 'if-match'?: string; readonly 'if-none-match'?: string };
}

export type CallSink = (call: AwsCall) => void;

/** The access key id a SigV4-signed request carries, from its Authorization header. */
export function principalOf(authorization: string | string[] | undefined): string {
  const header = Array.isArray(authorization) ? authorization[0] : authorization;
  const m = /Credential=([^/,\s]+)\//.exec(header ?? '');
  return m ? m[1] : 'anonymous';
}

/** The conditional-write headers of a request, as AwsCall records them: none, or the ones it carried. */
export function conditionsOf(headers: Readonly<Record<string, string | string[] | undefined>>): Pick<AwsCall, 'conditions'> {
  const conditions: Record<string, string> = {};
  for (const name of ['if-match', 'if-none-match'] as const) {
    const v = headers[name];
    if (v !== undefined) conditions[name] = Array.isArray(v) ? v.join(',') : v;
  }
  return Object.keys(conditions).length > 0 ? { conditions } : {};
}
