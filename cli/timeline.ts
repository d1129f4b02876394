/**
 * The timeline picture of a simulation (issue 13, item 4), like the reference's figures: one lane per worker and
 * authority; bars for held intervals, and the pauses drawn over them; points for stop times, deadlines, fence raises,
 * refused writes, writes and crashes; a legend naming every kind of mark the picture uses; the faults (pauses,
 * crashes) under the title. Drawn with Vega-Lite (compiled to Vega, rendered to SVG headless, no browser); PNG
 * through resvg. Rendering libraries live here only, never in lib/core/.
 */
import type { TimelineMark } from '../lib/sim/engine';

type Kind = TimelineMark['kind'];

/** What the legend calls each kind of mark. */
export const TIMELINE_LEGEND: Readonly<Record<Kind, string>> = {
  held: 'holds the lease',
  pause: 'paused (frozen)',
  stop: 'stop time',
  deadline: 'lease runs out',
  fence: 'fence raised',
  refused: 'write refused',
  crash: 'crash',
  write: 'write',
};
const COLORS: Record<Kind, string> = {
  held: '#4c78a8',
  pause: '#e45756',
  stop: '#f58518',
  deadline: '#54a24b',
  fence: '#b279a2',
  refused: '#9d1f1f',
  crash: '#000000',
  write: '#9ecae9',
};
/** Bars are squares in the legend. */
const SHAPES: Record<Kind, string> = {
  held: 'square',
  pause: 'square',
  stop: 'triangle-down',
  deadline: 'diamond',
  fence: 'triangle-up',
  refused: 'cross',
  crash: 'square',
  write: 'circle',
};

const sec = (ms: number) => (ms / 1000).toFixed(1);

/** The faults the marks show, one phrase each, in time order: who paused when, who (or which node) died. */
function faultsOf(marks: readonly TimelineMark[]): string[] {
  return marks
    .filter((m) => m.kind === 'pause' || m.kind === 'crash')
    .sort((a, b) => a.from - b.from)
    .map((m) =>
      m.kind === 'pause' ? `${m.lane} paused ${sec(m.from)}–${sec(m.to ?? m.from)} s` : `${m.label ?? `${m.lane} dies`} at ${sec(m.from)} s`,
    )
    .filter((f, i, all) => all.indexOf(f) === i);
}

/** The SVG text of a timeline. */
export async function timelineSvg(title: string, marks: readonly TimelineMark[]): Promise<string> {
  const vega = await import('vega');
  const { compile } = await import('vega-lite');
  const data = marks.map((m) => ({
    lane: m.lane,
    kind: m.kind,
    what: TIMELINE_LEGEND[m.kind],
    from: m.from / 1000,
    to: (m.to ?? m.from) / 1000,
    label: m.label ?? TIMELINE_LEGEND[m.kind],
  }));
  // One legend, color and shape on the same field with the same domain: only the kinds this picture uses.
  const used = (Object.keys(TIMELINE_LEGEND) as Kind[]).filter((k) => marks.some((m) => m.kind === k));
  const domain = used.map((k) => TIMELINE_LEGEND[k]);
  const legend = { title: null, orient: 'bottom', direction: 'horizontal', columns: 4, symbolSize: 90, labelLimit: 200 };
  const color = { field: 'what', type: 'nominal', scale: { domain, range: used.map((k) => COLORS[k]) }, legend };
  const shape = { field: 'what', type: 'nominal', scale: { domain, range: used.map((k) => SHAPES[k]) }, legend };
  const lanes = [...new Set(marks.map((m) => m.lane))];
  const y = { field: 'lane', type: 'nominal', sort: lanes, title: null };
  const x = { field: 'from', type: 'quantitative', title: 'true time (s)' };
  const faults = faultsOf(marks);
  // Only the layers with marks to draw: an empty layer has no extent, and Vega warns about it.
  const has = (test: (k: Kind) => boolean) => marks.some((m) => test(m.kind));
  const layers = [
    ...(has((k) => k === 'held')
      ? [
          {
            name: 'layer_held',
            transform: [{ filter: "datum.kind === 'held'" }],
            mark: { type: 'bar', height: 14, opacity: 0.85 },
            encoding: { x, x2: { field: 'to' }, y, color },
          },
          {
            transform: [{ filter: "datum.kind === 'held'" }],
            mark: { type: 'text', dy: -12, fontSize: 10, align: 'left' },
            encoding: { x: { field: 'from', type: 'quantitative' }, y, text: { field: 'label' } },
          },
        ]
      : []),
    // The pause over the held bar: narrower, in its own colour, with its length written under it.
    ...(has((k) => k === 'pause')
      ? [
          {
            name: 'layer_pause',
            transform: [{ filter: "datum.kind === 'pause'" }],
            mark: { type: 'bar', height: 6, stroke: '#000000', strokeWidth: 0.5 },
            encoding: { x, x2: { field: 'to' }, y, color },
          },
          {
            transform: [{ filter: "datum.kind === 'pause'" }],
            mark: { type: 'text', dy: 13, fontSize: 10, align: 'left', color: COLORS.pause },
            encoding: { x: { field: 'from', type: 'quantitative' }, y, text: { field: 'label' } },
          },
        ]
      : []),
    ...(has((k) => k !== 'held' && k !== 'pause')
      ? [
          {
            transform: [{ filter: "datum.kind !== 'held' && datum.kind !== 'pause'" }],
            mark: { type: 'point', filled: true, size: 90 },
            encoding: {
              x: { field: 'from', type: 'quantitative' },
              y,
              color,
              shape,
              tooltip: [{ field: 'label' }, { field: 'from', title: 't (s)' }],
            },
          },
        ]
      : []),
  ];
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, subtitle: faults.length > 0 ? `faults: ${faults.join('; ')}` : 'faults: none', anchor: 'start' },
    width: 760,
    height: layers.length > 0 ? { step: 34 } : 40,
    data: { values: data },
    layer: layers.length > 0 ? layers : [{ data: { values: [{}] }, mark: { type: 'text', text: 'no timeline marks' } }],
  };
  const view = new vega.View(vega.parse(compile(spec as never).spec), { renderer: 'none', logLevel: vega.Warn });
  return view.toSVG();
}

/** A PNG of the SVG (resvg: no browser, no system fonts needed beyond the defaults). */
export async function svgToPng(svg: string): Promise<Buffer> {
  const { Resvg } = await import('@resvg/resvg-js');
  return new Resvg(svg, { background: 'white', fitTo: { mode: 'zoom', value: 1.5 } }).render().asPng();
}
