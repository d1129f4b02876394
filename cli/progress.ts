/** What a human sees during a run: a progress bar on stderr, then a short summary table. */
import type { BillingSummary } from '../apps/billing/night';
import type { AuditReport } from '../apps/billing/audit';
import type { FencepostEvent } from '../lib/core/events';
import type { ChaosReport } from '../verify/chaos/chaos';

export function progressBar(total: number, stream: NodeJS.WriteStream = process.stderr): (e: FencepostEvent) => void {
  let done = 0;
  let lastLine = '';
  const tty = Boolean(stream.isTTY);
  // Each chunk task of a workflow run resumes the lease in its own Lambda, so one loss is reported once per task.
  const lost = new Set<string>();
  const draw = (note: string) => {
    const width = 30;
    const filled = Math.round((done / total) * width);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} invoices ${note}`;
    if (tty) stream.write(`\r${line.padEnd(lastLine.length)}`);
    else stream.write(line + '\n');
    lastLine = line;
  };
  return (e) => {
    switch (e.event) {
      case 'sighted':
        if (e.holder !== undefined)
          stream.write(
            `${tty ? '\r' : ''}lease held by ${String(e.holder)} (epoch ${String(e.epoch)}): claiming once its rvn stays unchanged for ${String(e.waitMs)} ms on our own clock\n`,
          );
        break;
      case 'claim':
        stream.write(`claimed the lease: token ${e.token}\n`);
        break;
      case 'fence-raised':
        stream.write(`fence raised to ${e.token} (was ${String(e.previousFence ?? 'unset')})\n`);
        break;
      case 'batch-committed':
        done += Number(e.recorded) + Number(e.alreadyRecorded);
        if (tty) draw(`chunk ${Number(e.chunk) + 1}`);
        break;
      case 'chunk-committed':
        draw(`chunk ${Number(e.chunk) + 1} committed`);
        break;
      case 'batch-rejected':
        stream.write(`\nbatch refused by the fence (our token ${e.token}, fence ${String(e.fence)}): stopping\n`);
        break;
      case 'lease-lost':
        if (lost.has(`${e.key}#${e.token}`)) break;
        lost.add(`${e.key}#${e.token}`);
        stream.write(`\nlease lost (holder now ${String(e.holderNow)})\n`);
        break;
      case 'completed':
        if (tty) stream.write('\n');
        break;
      default:
        break;
    }
  };
}

export function summaryTable(s: BillingSummary, audit?: AuditReport): string {
  const rows: [string, string][] = [
    ['job', s.jobId],
    ['worker', s.worker],
    ['token', String(s.token ?? '-')],
    ['outcome', s.outcome],
    ['invoices recorded', s.invoicesRecorded.toLocaleString('en-US')],
    ['already recorded', s.invoicesAlreadyRecorded.toLocaleString('en-US')],
    ['transactions', s.transactions.toLocaleString('en-US')],
    ['fenced rejections', String(s.fencedRejections)],
    ['chunks committed', String(s.chunksCommitted)],
    ['seconds', s.seconds.toFixed(1)],
    ['invoices/s', s.seconds > 0 ? Math.round((s.invoicesRecorded + s.invoicesAlreadyRecorded) / s.seconds).toLocaleString('en-US') : '-'],
  ];
  if (s.reason) rows.push(['reason', s.reason]);
  if (audit) rows.push(['audit', audit.ok ? 'all invariants hold' : 'INVARIANT BROKEN']);
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v}`).join('\n');
}

export function auditTable(r: AuditReport): string {
  const lines = [
    `audit of ${r.jobId}: state ${r.state ?? 'absent'}, fence ${r.fence ?? '-'}, epoch ${r.epoch ?? '-'}, ${r.invoicesFound}/${r.invoicesExpected} invoices`,
  ];
  for (const c of r.checks) lines.push(`  ${c.ok ? 'ok  ' : 'FAIL'}  invariant ${c.invariant}: ${c.name}: ${c.detail}`);
  return lines.join('\n');
}

export function chaosTable(r: ChaosReport): string {
  const lines = [
    `chaos: ${r.schedules} schedules (seed ${r.seed}) in ${r.seconds.toFixed(0)} s: ${r.violations} invariant violations`,
    `  schedules by kind: ${Object.entries(r.schedulesByKind)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  faults injected:   ${Object.entries(r.faultsByKind)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  takeovers ${r.takeovers}, fenced rejections ${r.fencedRejections}`,
  ];
  for (const f of r.results.filter((x) => !x.ok)) lines.push(`  FAIL seed ${f.seed} ${f.kind}: ${f.violations.join('; ')}`);
  return lines.join('\n');
}
