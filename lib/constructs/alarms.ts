/**
 * Alarms, their topic and the dashboard (ARCHITECTURE.md section 6; docs/ALARMS.md says what to do for each).
 *
 * None of these keep the data safe: the fence does. They tell a person that the assumptions the lease
 * leans on are failing (clock offset eating the margin, zombies being fenced, contention), or that the run
 * will not be DONE in time (failed executions, undelivered starts, no completed run by the deadline).
 *
 * App metrics are read by the names in lib/core/observability.ts, with the `service` dimension Powertools adds: the
 * job's own (`fencepost-<job>`), so two jobs in one account never read each other's metrics.
 */
import { Annotations, ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE, Metric, serviceName } from '../core/observability';
import { cronCalendar, zoneOffsetMinutes } from './cron';
import { pascalName } from './fenced-workflow';

/** What the alarms watch: the job's tables and state machines, their dead-letter queues, and the thresholds. */
export interface FencepostAlarmsProps {
  /** The job's name: the alarms' descriptions say it, and its app metrics are read under its service (`serviceName`). */
  readonly name: string;
  /** The lock table. */
  readonly lockTable: dynamodb.ITable;
  /** The job table. */
  readonly jobTable: dynamodb.ITable;
  /**
   * The tables the chunks write in their fenced transactions, by a short lowercase id (e.g. `{ orders: table }`):
   * their TransactionConflict is watched with the job table's.
   * @default - the job table's alone
   */
  readonly fencedTables?: Readonly<Record<string, dynamodb.ITable>>;
  /** The job's state machine. */
  readonly stateMachine: sfn.IStateMachine;
  /** The job's schedule's dead-letter queue. */
  readonly deadLetterQueue: sqs.IQueue;
  /** The orphan sweeper's state machine. */
  readonly sweeper: sfn.IStateMachine;
  /** The sweeper schedule's dead-letter queue. */
  readonly sweeperDeadLetterQueue: sqs.IQueue;
  /**
   * What the job's chunks report, graphed first on the dashboard (e.g. records written and chunks committed).
   * @default - no progress graph
   */
  readonly progress?: { readonly left: cloudwatch.IMetric[]; readonly right?: cloudwatch.IMetric[] };
  /** Alarm above this estimated clock offset (ms); below the margin. */
  readonly clockOffsetAlarmMs: number;
  /** The lease margin (ms), drawn on the clock-offset graph for scale. */
  readonly marginMs: number;
  /** Alarm at this many fenced rejections in 5 minutes. */
  readonly fencedRejectionsThreshold: number;
  /** Alarm above this many ConditionalCheckFailedRequests on one table, or TransactionConflicts on the fenced tables, in 5 minutes. */
  readonly conditionalCheckFailedThreshold: number;
  /** Hour (0..23, in timeZone) by which the run must be DONE. */
  readonly deadlineHour: number;
  /** IANA time zone of the schedule and the deadline. */
  readonly timeZone: string;
  /**
   * The job's schedule's expression: the NotDone alarm checks only the deadlines that follow a scheduled start
   * (a schedule on weekdays only does not page on Saturday).
   * @default - a run every day
   */
  readonly scheduleExpression?: string;
  /** E-mail address subscribed to the topic. @default - no subscription */
  readonly alarmEmail?: string;
  /** The sweeper's bound on re-queues of one run, said in the SweeperGaveUp alarm. */
  readonly maxRequeuesPerRun: number;
}

/** The alarms, by name (FencepostAlarms.alarms). */
export type AlarmName =
  | 'clockOffset'
  | 'fencedRejections'
  | 'lockConditionalChecks'
  | 'jobConditionalChecks'
  | 'transactionConflicts'
  | 'notDone'
  | 'executionsFailed'
  | 'executionsTimedOut'
  | 'executionsAborted'
  | 'scheduleDeadLetters'
  | 'sweeperStorm'
  | 'sweeperGaveUp'
  | 'sweeperFailed'
  | 'sweeperDeadLetters';

const FIVE_MINUTES = Duration.minutes(5);

/**
 * A metric one job's functions publish (Powertools: the namespace from lib/core/observability.ts, and the `service`
 * dimension its functions get from POWERTOOLS_SERVICE_NAME, `serviceName(job)`).
 *
 * @param job - the job's name (FencedJob's `name`)
 * @param metricName - its name (lib/core/observability.ts `Metric`)
 * @param statistic - e.g. `Sum`, `Maximum`
 * @param period - @default Duration.minutes(5)
 */
export function appMetric(job: string, metricName: string, statistic: string, period: Duration = FIVE_MINUTES): cloudwatch.Metric {
  return new cloudwatch.Metric({ namespace: METRICS_NAMESPACE, metricName, dimensionsMap: { service: serviceName(job) }, statistic, period });
}

/**
 * TransactionConflict counts item-level requests DynamoDB rejected because another request was writing the same item
 * at that moment. A condition that cancels a transaction is counted neither there nor in ConditionalCheckFailedRequests
 * (which the metrics page defines for PutItem, UpdateItem and DeleteItem): the app's FencedRejections is the only
 * count of those (docs/ALARMS.md).
 */
function transactionConflicts(props: Pick<FencepostAlarmsProps, 'jobTable' | 'fencedTables'>): cloudwatch.MathExpression {
  const tables: Record<string, dynamodb.ITable> = { jobs: props.jobTable, ...props.fencedTables };
  const ids = Object.keys(tables);
  return new cloudwatch.MathExpression({
    expression: ids.map((id) => `FILL(${id}, 0)`).join(' + '),
    usingMetrics: Object.fromEntries(ids.map((id) => [id, tables[id].metric('TransactionConflict', { statistic: 'Sum', period: FIVE_MINUTES })])),
    period: FIVE_MINUTES,
    label: `${ids.join(' + ')} TransactionConflict`,
  });
}

/** The job's alarms, the topic they notify (KMS-encrypted) and its dashboard. */
export class FencepostAlarms extends Construct {
  /** Every alarm notifies it (docs/ALARMS.md says what to do for each). */
  readonly topic: sns.Topic;
  /** The topic's customer managed key (CloudWatch cannot publish under the AWS managed one). */
  readonly key: kms.Key;
  /** Each alarm, by its name (docs/ALARMS.md). */
  readonly alarms: Readonly<Record<AlarmName, cloudwatch.Alarm>>;
  /** The job's dashboard: the chunks' progress (when given), runs, executions, rejections, the sweeper, the alarms' states. */
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: FencepostAlarmsProps) {
    super(scope, id);
    const stack = Stack.of(this);

    // A customer managed key, because CloudWatch cannot publish to a topic under the AWS managed SNS key (its key
    // policy can't grant cloudwatch.amazonaws.com). The topic holds no data after delivery: destroy with the stack.
    this.key = new kms.Key(this, 'TopicKey', {
      description: 'Fencepost alarm topic encryption',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.topic = new sns.Topic(this, 'Topic', { displayName: 'Fencepost alarms', masterKey: this.key, enforceSSL: true });
    const cloudwatchAlarms = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
    const fromThisAccountsAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: {
        'aws:SourceArn': stack.formatArn({ service: 'cloudwatch', resource: 'alarm', resourceName: '*', arnFormat: ArnFormat.COLON_RESOURCE_NAME }),
      },
    };
    this.key.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [cloudwatchAlarms],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromThisAccountsAlarms,
      }),
    );
    this.topic.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [cloudwatchAlarms],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: fromThisAccountsAlarms,
      }),
    );
    if (props.alarmEmail) this.topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));

    const alarm = (name: string, p: cloudwatch.AlarmProps): cloudwatch.Alarm => {
      const a = new cloudwatch.Alarm(this, name, p);
      a.addAlarmAction(new actions.SnsAction(this.topic));
      return a;
    };
    const atLeast = (metric: cloudwatch.IMetric, threshold: number, alarmDescription: string): cloudwatch.AlarmProps => ({
      metric,
      threshold,
      alarmDescription,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const above = (metric: cloudwatch.IMetric, threshold: number, alarmDescription: string): cloudwatch.AlarmProps => ({
      ...atLeast(metric, threshold, alarmDescription),
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    const conditionalChecks = (table: dynamodb.ITable, which: string, normal: string) =>
      above(
        table.metricConditionalCheckFailedRequests({ statistic: 'Sum', period: FIVE_MINUTES }),
        props.conditionalCheckFailedThreshold,
        `The ${which} table refused more than ${props.conditionalCheckFailedThreshold} conditional writes in 5 minutes. Some are normal (${normal}); ` +
          'a rate above this means contention (several claimants or duplicate triggers) or a zombie storm (many holders acting on leases they lost). ' +
          'Safety holds (the fence refused them); find who is writing: Fencepost dashboard, LeaseLost, FencedRejections, the executions list. See docs/ALARMS.md.',
      );

    const runs = appMetric(props.name, Metric.runsCompleted, 'Sum', Duration.days(1));
    const days = props.scheduleExpression === undefined ? undefined : checkedWindowDays(props.scheduleExpression, props.timeZone, props.deadlineHour);
    const notDone = alarm(`${pascalName(props.name)}NotDone`, {
      // On the days no start precedes the deadline, the window reads 1 (not breaching) instead of its completed runs.
      metric: days
        ? new cloudwatch.MathExpression({
            expression: `IF(${[...days].map((d) => `DAY(runs) == ${d}`).join(' OR ')}, runs, 1)`,
            usingMetrics: {
              runs: new cloudwatch.MathExpression({ expression: 'FILL(completed, 0)', usingMetrics: { completed: runs }, period: Duration.days(1) }),
            },
            period: Duration.days(1),
            label: `${Metric.runsCompleted} on the days a run is scheduled`,
          })
        : runs,
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING, // no datapoint at all is exactly "no run completed"
      alarmDescription:
        `No ${props.name} run completed in the 24 hours ending at the ${props.deadlineHour}:00 ${props.timeZone} deadline${days ? ' that follows a scheduled start' : ''}: today's run is not DONE. ` +
        `Check the ${props.name} state machine executions and the schedule DLQ, then start the run by hand (a duplicate run is harmless: lease and fence). See docs/ALARMS.md.`,
    });
    // Evaluated once a day, when a 1-day period closes. The period's "midnight" is placed at the deadline by the
    // fixed UTC offset below, so the alarm looks at exactly the 24 hours that end at the deadline (docs/ALARMS.md).
    (notDone.node.defaultChild as cloudwatch.CfnAlarm).evaluationWindow = {
      wallClockWindow: { timezone: deadlineWindowZone(props.timeZone, props.deadlineHour) },
    };
    const calendar = props.scheduleExpression === undefined ? undefined : cronCalendar(props.scheduleExpression);
    if (calendar && !calendar.weekdays) {
      Annotations.of(notDone).addWarningV2(
        'fencepost:notDoneEveryDay',
        `The schedule ${props.scheduleExpression} runs on days of the month, months or years, which the NotDone alarm cannot follow: it checks every day's deadline, and pages on a day without a scheduled run.`,
      );
    }

    const conflicts = transactionConflicts(props);
    const sm = props.stateMachine;
    this.alarms = {
      // Alarm on what the estimate proves, max(0, |offset| − error), not on |offset|: one Date header is truncated to
      // the second, so a correct clock's |offset| alone reads up to ~500 ms (docs/ALARMS.md, test/unit/clock-offset.test.ts).
      clockOffset: alarm(
        'ClockOffset',
        above(
          appMetric(props.name, Metric.clockOffsetBeyondErrorMs, 'Maximum'),
          props.clockOffsetAlarmMs,
          `A Lambda's wall clock is provably more than ${props.clockOffsetAlarmMs} ms off AWS's time: the offset estimated from response Date headers, less its error bound (docs/CLOCK.md). ` +
            `The lease margin (${props.marginMs} ms) absorbs clock error; this fires well before it is used up. Durations are timed on the monotonic clock, ` +
            'so safety does not depend on it, but investigate the execution environment (NTP/chrony, a VM pause) before the offset nears the margin.',
        ),
      ),
      fencedRejections: alarm(
        'FencedRejections',
        atLeast(
          appMetric(props.name, Metric.fencedRejections, 'Sum'),
          props.fencedRejectionsThreshold,
          `At least ${props.fencedRejectionsThreshold} write(s) in 5 minutes were refused by the fence (a TransactWriteItems cancelled by its ConditionCheck on the job row, or an S3 412): a holder kept acting after it lost its lease (a zombie: it paused or lost its renewals, and woke up still believing it held the run). ` +
            'Counted by the Lambdas themselves: DynamoDB publishes no per-table metric for a condition that cancels a transaction. ' +
            'The fence worked and nothing was written twice; find why the holder overran its lease (long GC/freeze, throttling, a renewal path failing) via LeaseLost and the executions.',
        ),
      ),
      lockConditionalChecks: alarm(
        'LockConditionalChecks',
        conditionalChecks(
          props.lockTable,
          'lock',
          "a waiting claimant's claim after its lease-long wait when the holder renewed, a duplicate trigger, a renewal after takeover",
        ),
      ),
      jobConditionalChecks: alarm(
        'JobConditionalChecks',
        conditionalChecks(
          props.jobTable,
          'job',
          "a duplicate trigger meeting a DONE job, a sweeper re-queue that lost a race to a new holder; a chunk's fenced transaction is not counted here",
        ),
      ),
      transactionConflicts: alarm(
        'TransactionConflicts',
        above(
          conflicts,
          props.conditionalCheckFailedThreshold,
          `DynamoDB rejected more than ${props.conditionalCheckFailedThreshold} item-level writes on the job table and the tables the chunks write in 5 minutes because another request was writing the same item at that moment (TransactionConflict). ` +
            "With one chunk at a time a holder never races itself, so this means two writers on one run at once: a zombie's transactions against the new holder's raise or puts, or a sweeper re-queue against a running chunk. " +
            'The chunk retries them and the fence keeps the data safe; find the second writer (FencedRejections, LeaseLost, the executions list). See docs/ALARMS.md.',
        ),
      ),
      notDone,
      executionsFailed: alarm(
        'ExecutionsFailed',
        atLeast(
          sm.metricFailed({ period: FIVE_MINUTES }),
          1,
          `A ${props.name} execution failed (a lost lease ends quietly, so this is something else: a bug, a permission, a store error). ` +
            'It released its lease conditionally. Read the execution history, fix the cause, start the run again (safe to re-run).',
        ),
      ),
      executionsTimedOut: alarm(
        'ExecutionsTimedOut',
        atLeast(
          sm.metricTimedOut({ period: FIVE_MINUTES }),
          1,
          `A ${props.name} execution hit its state machine timeout. Its lease lapses on its own and the sweeper re-queues the job; ` +
            'check why it was slow (throttling, a stuck chunk) and whether the run still finishes before the deadline.',
        ),
      ),
      executionsAborted: alarm(
        'ExecutionsAborted',
        atLeast(
          sm.metricAborted({ period: FIVE_MINUTES }),
          1,
          `A ${props.name} execution was stopped (StopExecution, by a person or automation). It could not release its lease, which lapses; ` +
            'the sweeper re-queues the job. Make sure the stop was intended and that the run is started again.',
        ),
      ),
      scheduleDeadLetters: alarm(
        'ScheduleDeadLetters',
        above(
          props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: FIVE_MINUTES }),
          0,
          `EventBridge Scheduler could not start the ${props.name} state machine after its retries: a run was never started. ` +
            'Read the message (it carries the error), fix it (role, state machine), start the run by hand, then purge the queue.',
        ),
      ),
      sweeperStorm: alarm(
        'SweeperStorm',
        atLeast(
          appMetric(props.name, Metric.sweeperStorm, 'Sum'),
          1,
          'The orphan sweeper saw most claimed jobs look dead at once and re-queued NONE of them (when many leases look dead at once, the likely cause is our own renewal ' +
            `path is failing, not the holders). Check the lock table (throttling, errors), the ${props.name} executions and LeaseLost. If the holders ` +
            'really are gone (a mass crash), start those runs again by hand; the fence keeps that safe.',
        ),
      ),
      sweeperGaveUp: alarm(
        'SweeperGaveUp',
        atLeast(
          appMetric(props.name, Metric.runsGivenUp, 'Maximum'),
          1,
          `The orphan sweeper gave up on a ${props.name} run: it re-queued it ${props.maxRequeuesPerRun} times and every run failed (a missing grant, a bug, out of memory), ` +
            'so it starts no more runs of it. The row stays RUNNING in the sparse index, and while it does every sweep window fires this alarm again. ' +
            "The sweeper's log names the run; read its last execution's history, fix the cause, then start the run by hand or re-arm it " +
            '(remove requeues from its job row). See docs/ALARMS.md.',
        ),
      ),
      sweeperFailed: alarm(
        'SweeperFailed',
        atLeast(
          props.sweeper.metricFailed({ period: FIVE_MINUTES }),
          1,
          'An orphan sweeper execution failed: orphaned runs are not being re-queued until it works again. Read the execution history.',
        ),
      ),
      sweeperDeadLetters: alarm(
        'SweeperDeadLetters',
        above(
          props.sweeperDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: FIVE_MINUTES }),
          0,
          'EventBridge Scheduler could not start the orphan sweeper after its retries. Sweeps are missed until it works again; ' +
            'read the message (it carries the error), fix the role or state machine, then purge the queue.',
        ),
      ),
    };

    this.dashboard = this.buildDashboard(props);
  }

  private buildDashboard(props: FencepostAlarmsProps): cloudwatch.Dashboard {
    const sum = (name: string) => appMetric(props.name, name, 'Sum');
    const sm = props.stateMachine;
    const graph = (title: string, left: cloudwatch.IMetric[], extra: Partial<cloudwatch.GraphWidgetProps> = {}) =>
      new cloudwatch.GraphWidget({ title, left, width: 8, height: 6, ...extra });
    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard');
    dashboard.addWidgets(
      ...(props.progress ? [graph('Run progress', props.progress.left, { right: props.progress.right })] : []),
      graph('Runs', [sum(Metric.runsCompleted), sum(Metric.runsAlreadyDone), sum(Metric.runsLost), sum(Metric.runsAnotherHolder)]),
      graph('Executions', [sm.metricStarted(), sm.metricSucceeded(), sm.metricFailed(), sm.metricTimedOut(), sm.metricAborted()]),
    );
    dashboard.addWidgets(
      graph('Rejections', [sum(Metric.fencedRejections)], {
        right: [
          props.lockTable.metricConditionalCheckFailedRequests({ statistic: 'Sum', label: 'lock table ConditionalCheckFailed' }),
          props.jobTable.metricConditionalCheckFailedRequests({ statistic: 'Sum', label: 'job table ConditionalCheckFailed' }),
          transactionConflicts(props),
        ],
      }),
      graph('Lease losses and takeover waits', [sum(Metric.leaseLost)], { right: [appMetric(props.name, Metric.takeoverWaitMs, 'Maximum')] }),
      graph('Sweeper', [sum(Metric.orphansFound), sum(Metric.orphansRequeued), sum(Metric.sweeperStorm), sum(Metric.runsGivenUp)], {
        right: [sum(Metric.sweeperSkippedAlive)],
      }),
      graph(
        'Clock offset (ms)',
        [
          appMetric(props.name, Metric.clockOffsetBeyondErrorMs, 'Maximum'),
          appMetric(props.name, Metric.clockOffsetMs, 'Maximum'),
          appMetric(props.name, Metric.clockOffsetErrorMs, 'Maximum'),
        ],
        {
          leftAnnotations: [
            { value: props.clockOffsetAlarmMs, label: 'alarm', color: cloudwatch.Color.ORANGE },
            { value: props.marginMs, label: 'lease margin', color: cloudwatch.Color.RED },
          ],
        },
      ),
    );
    dashboard.addWidgets(
      graph('Schedule dead letters', [props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum' })]),
      new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: Object.values(this.alarms), width: 16, height: 6 }),
    );
    return dashboard;
  }
}

/**
 * The fixed UTC offset whose midnight falls on the deadline, for the deadline alarm's 1-day wall-clock window
 * (CloudWatch aligns 1-day windows to midnight in the zone given). For a zone with daylight saving time, the
 * deadline is placed at its latest UTC instant of the year, so the alarm fires at the deadline or up to the DST
 * shift (an hour) after it, never before. E.g. UTC 5 h gives "-05:00"; Europe/Paris 5 h gives "-04:00" (04:00 UTC).
 */
export function deadlineWindowZone(timeZone: string, deadlineHour: number, year = 2025): string {
  const deadlineUtc = latestDeadlineUtc(timeZone, deadlineHour, year); // minutes after UTC midnight (mod a day)
  let zone = ((-deadlineUtc % 1440) + 1440) % 1440; // offset whose local midnight is that UTC instant
  if (zone >= 720) zone -= 1440; // as an offset between -12:00 and +11:59
  const sign = zone < 0 ? '-' : '+';
  const abs = Math.abs(zone);
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** The deadline's latest UTC instant of the year, in minutes after the UTC midnight of its local date (may be < 0 or ≥ 1440). */
function latestDeadlineUtc(timeZone: string, deadlineHour: number, year = 2025): number {
  const offsets: number[] = [];
  for (let month = 0; month < 12; month++) {
    for (const day of [1, 15]) offsets.push(utcOffsetMinutes(timeZone, new Date(Date.UTC(year, month, day, 12))));
  }
  return deadlineHour * 60 - Math.min(...offsets);
}

/**
 * The deadline windows the NotDone alarm checks, as CloudWatch's DAY() numbers (Monday 1 … Sunday 7) of each window's
 * start, the timestamp CloudWatch gives a period's datapoint, read in UTC: those that follow a scheduled start. A start
 * before the deadline hour is checked at that day's deadline, one at or after it at the next day's. Undefined when
 * every window is checked: a schedule every day, a rate, or days no set of weekdays says (lib/constructs/cron.ts).
 *
 * @param expression - the job's schedule's expression
 * @param timeZone - its IANA time zone, the deadline's too
 * @param deadlineHour - the deadline's hour (0..23) in timeZone
 * @returns the DAY() numbers of the checked windows, or undefined for all of them
 */
function checkedWindowDays(expression: string, timeZone: string, deadlineHour: number): Set<number> | undefined {
  const calendar = cronCalendar(expression);
  const weekdays = calendar?.weekdays;
  if (!calendar || !weekdays || weekdays.size === 7) return undefined;
  // The window's end is the deadline placed by deadlineWindowZone; its start is a day earlier, on this UTC weekday shift.
  const shift = Math.floor(latestDeadlineUtc(timeZone, deadlineHour) / 1440) - 1;
  const days = new Set<number>();
  for (const start of calendar.startMinutes) {
    for (const weekday of weekdays) {
      const deadlineWeekday = weekday + (start >= deadlineHour * 60 ? 1 : 0);
      const windowStart = (((deadlineWeekday + shift) % 7) + 7) % 7; // 0 Sunday … 6 Saturday
      days.add(windowStart === 0 ? 7 : windowStart);
    }
  }
  return new Set([...days].sort((a, b) => a - b));
}

function utcOffsetMinutes(timeZone: string, at: Date): number {
  return zoneOffsetMinutes(timeZone, at.getTime());
}
