/**
 * The local runner (aws-local-stepfunctions) has no Distributed Map: it knows neither ProcessorConfig's DISTRIBUTED
 * mode nor ItemReader, ItemBatcher, ResultWriter or the tolerated-failure fields. `toLocalDefinition` turns the
 * synthesized definition into one it can execute with the same behaviour for what FencedJob's workflow uses: a
 * DISTRIBUTED Map over ItemsPath becomes an inline Map with the same ItemProcessor states, ItemsPath, ItemSelector,
 * MaxConcurrency, ResultPath/ResultSelector/OutputPath, Retry and Catch (its error routing translated, below).
 * Anything whose meaning would change is refused with an error that names the state and the field.
 *
 * Pure: the input is not modified, and a definition without a Distributed Map comes back equal to it.
 * What still differs from AWS is listed in LOCAL_DIFFERENCES (and docs/DESIGN.md "Large runs").
 */

type Json = Record<string, unknown>;

/**
 * What AWS reports to a Distributed Map's Retry and Catch when a child execution fails and no failure is tolerated:
 * never the child's own error (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#maprun-fail-threshold).
 */
export const MAP_RUN_FAILED = 'States.ExceedToleratedFailureThreshold';

/** What a converted definition does not reproduce. */
export const LOCAL_DIFFERENCES: readonly string[] = [
  'Each item runs as an iteration of the one local execution, not as a child execution: no child histories, names or ARNs, no Map Run (DescribeMapRun, redrive, its CloudWatch metrics); ExecutionType (STANDARD/EXPRESS) and Label are dropped.',
  `A failed child reaches the Map's Retry/Catch in AWS as ${MAP_RUN_FAILED} (cause "The specified tolerated failure threshold was exceeded"); locally the first clause that would match it is widened to States.ALL, the clauses before it are dropped (they only ever see the Map's own errors in AWS) and so are those after it, and its ResultPath receives the child's own Error and Cause.`,
  "The Map's own errors (States.DataLimitExceeded on its assembled output, States.Runtime, Map Run start failures) are not raised locally, and AWS's quotas (256 KiB per state, 25,000 events per execution, 10,000 concurrent children, Lambda concurrency) are not enforced.",
  'Only the default tolerated failure (none) is supported: the first failed item fails the Map, as inline. A non-zero ToleratedFailureCount/Percentage, or their *Path forms, is refused.',
  'ItemReader, ItemBatcher, ResultWriter and MaxConcurrencyPath are refused (no S3 reads or writes locally, and batching changes what an item is).',
  "A child execution's context object ($$.Execution, $$.StateMachine) is its own in AWS; a processor that reads it is refused.",
  'When the Map fails, AWS stops the running children (a Lambda already invoked may still finish); locally the runner stops queued iterations (lib/local/workflow.ts).',
];

/** Fields a DISTRIBUTED Map may keep as they are: an inline Map means the same by them. */
const KEPT = new Set([
  'Type',
  'Comment',
  'InputPath',
  'OutputPath',
  'ItemsPath',
  'ItemSelector',
  'Parameters',
  'MaxConcurrency',
  'ResultPath',
  'ResultSelector',
  'Next',
  'End',
  'Retry',
  'Catch',
  'ItemProcessor',
]);
/** Fields that name the Map Run or the child executions only: dropped. */
const DROPPED = new Set(['Label']);
const TOLERANCE = ['ToleratedFailureCount', 'ToleratedFailurePercentage'];
const REFUSED: Record<string, string> = {
  ItemReader: 'items read from S3 (use ItemsPath over the state input)',
  ItemBatcher: "batching changes each iteration's input to {Items: [...]}",
  ResultWriter: 'results written to S3',
  MaxConcurrencyPath: 'a concurrency read from the state input',
  ToleratedFailureCountPath: 'a tolerated failure count read from the state input',
  ToleratedFailurePercentagePath: 'a tolerated failure percentage read from the state input',
};

export class UnsupportedDistributedMapError extends Error {
  override readonly name = 'UnsupportedDistributedMapError';
  constructor(
    readonly state: string,
    readonly problems: readonly string[],
  ) {
    super(`Distributed Map ${state} cannot run locally: ${problems.join('; ')}`);
  }
}

/** A definition aws-local-stepfunctions can execute, with every DISTRIBUTED Map (at any depth) made inline. */
export function toLocalDefinition<T extends object>(definition: T): T {
  return convertMachine(structuredClone(definition) as Json, []) as T;
}

/** True when the definition (at any depth) has a Map in DISTRIBUTED mode. */
export function hasDistributedMap(definition: object): boolean {
  let found = false;
  walk(definition as Json, (state) => {
    found ||= isDistributed(state);
  });
  return found;
}

function isDistributed(state: Json): boolean {
  const config = (state.ItemProcessor as Json | undefined)?.ProcessorConfig as Json | undefined;
  return state.Type === 'Map' && config?.Mode === 'DISTRIBUTED';
}

function walk(machine: Json, visit: (state: Json, name: string) => void): void {
  for (const [name, state] of Object.entries((machine.States ?? {}) as Record<string, Json>)) {
    visit(state, name);
    const inner = (state.ItemProcessor ?? state.Iterator) as Json | undefined;
    if (inner) walk(inner, visit);
    for (const branch of (state.Branches as Json[] | undefined) ?? []) walk(branch, visit);
  }
}

/** Converts in place (the caller passes a copy); `path` names the enclosing states for error messages. */
function convertMachine(machine: Json, path: string[]): Json {
  for (const [name, state] of Object.entries((machine.States ?? {}) as Record<string, Json>)) {
    const here = [...path, name];
    if (isDistributed(state)) convertMap(state, here.join(' › '));
    const inner = (state.ItemProcessor ?? state.Iterator) as Json | undefined;
    if (inner) convertMachine(inner, here);
    for (const branch of (state.Branches as Json[] | undefined) ?? []) convertMachine(branch, here);
  }
  return machine;
}

function convertMap(state: Json, name: string): void {
  const problems: string[] = [];
  for (const [field, value] of Object.entries(state)) {
    if (KEPT.has(field)) continue;
    if (field === 'QueryLanguage' && value === 'JSONPath') continue; // the default; JSONata Maps use other fields

    if (DROPPED.has(field)) {
      delete state[field];
    } else if (TOLERANCE.includes(field)) {
      // Zero is the default (no failure tolerated), which is what an inline Map does.
      if (value === 0) delete state[field];
      else problems.push(`${field} ${JSON.stringify(value)}: a tolerated failure (the local Map fails on its first failed item)`);
    } else if (field in REFUSED) {
      problems.push(`${field}: ${REFUSED[field]}`);
    } else {
      problems.push(`${field}: not a field the local conversion knows`);
    }
  }
  const processor = state.ItemProcessor as Json;
  const config = processor.ProcessorConfig as Json;
  const unknownConfig = Object.keys(config).filter((k) => k !== 'Mode' && k !== 'ExecutionType');
  if (unknownConfig.length > 0) problems.push(`ProcessorConfig.${unknownConfig.join(', ')}: not known to the local conversion`);
  // In AWS these name the child execution, not the parent: a local iteration would see the parent's.
  const contextRead = /"\$\$\.(Execution|StateMachine)\b/.exec(JSON.stringify({ ...processor, ProcessorConfig: undefined }));
  if (contextRead) problems.push(`its ItemProcessor reads $$.${contextRead[1]}, which is the child execution's own in AWS`);
  if (problems.length > 0) throw new UnsupportedDistributedMapError(name, problems);

  delete processor.ProcessorConfig; // inline is the default mode
  for (const field of ['Retry', 'Catch'] as const) {
    if (!Array.isArray(state[field])) continue;
    const clauses = routeAsMapRunFailed(state[field] as Json[]);
    if (clauses.length > 0) state[field] = clauses;
    else delete state[field];
  }
}

/**
 * The clauses that would see a failed child in AWS, for an inline Map whose iterations fail with the child's own
 * error: the first clause matching MAP_RUN_FAILED (or States.ALL) now matches everything; earlier clauses never see
 * a child's failure in AWS, and later ones never see any once everything is matched, so both go.
 */
function routeAsMapRunFailed(clauses: Json[]): Json[] {
  const first = clauses.find((c) => {
    const errors = (c.ErrorEquals as string[] | undefined) ?? [];
    return errors.includes(MAP_RUN_FAILED) || errors.includes('States.ALL');
  });
  return first ? [{ ...first, ErrorEquals: ['States.ALL'] }] : [];
}
