/**
 * The latency-by-trial plot of a tuning database, as SVG: one point per
 * measured candidate, failures as crosses along the top, the best-so-far as a
 * step line; the y axis is logarithmic when latencies span more than a factor
 * of 10 (as TuneResult.plot draws it with matplotlib).
 */

import { bestSoFar, IRecord } from './database';

export interface IPlotBox {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

export const DEFAULT_BOX: IPlotBox = {
  width: 640,
  height: 320,
  left: 64,
  right: 16,
  top: 16,
  bottom: 40
};

export interface IPlotPoint {
  trial: number;
  x: number;
  y: number;
  failed: boolean;
  noisy: boolean;
  /** latency in ms (null for a failure) */
  ms: number | null;
}

export interface ITick {
  value: number;
  pos: number;
  label: string;
}

export interface IPlotGeometry {
  box: IPlotBox;
  points: IPlotPoint[];
  /** the best-so-far step line as SVG path data ('' when nothing succeeded) */
  bestPath: string;
  log: boolean;
  xTicks: ITick[];
  yTicks: ITick[];
  /** y of the failure row */
  failY: number;
}

function fmt(v: number): string {
  if (v === 0) {
    return '0';
  }
  const a = Math.abs(v);
  if (a >= 1000 || a < 0.001) {
    return v.toExponential(1);
  }
  return String(Number(v.toPrecision(3)));
}

function niceStep(span: number, count: number): number {
  const raw = span / Math.max(count, 1);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) {
    if (m * p >= raw) {
      return m * p;
    }
  }
  return 10 * p;
}

/** Where everything goes; pure, so tests check positions without a browser. */
export function plotGeometry(records: IRecord[], box: IPlotBox = DEFAULT_BOX): IPlotGeometry {
  const x0 = box.left;
  const x1 = box.width - box.right;
  const y0 = box.top;
  const y1 = box.height - box.bottom;
  const failY = y0 + 6;
  const n = records.length;
  const ms = records.map(r => (r.median === null ? null : r.median * 1e3));
  const ok = ms.filter((v): v is number => v !== null);
  let lo = ok.length ? Math.min(...ok) : 1;
  let hi = ok.length ? Math.max(...ok) : 1;
  const log = ok.length > 0 && lo > 0 && hi / lo > 10;
  if (hi === lo) {
    lo = lo === 0 ? 0 : lo * 0.9;
    hi = hi === 0 ? 1 : hi * 1.1;
  }
  // a margin of 5% so no point sits on the axis
  if (log) {
    const pad = Math.pow(10, 0.05 * (Math.log10(hi) - Math.log10(lo)));
    lo /= pad;
    hi *= pad;
  } else {
    const pad = 0.05 * (hi - lo);
    lo = Math.max(0, lo - pad);
    hi += pad;
  }
  // the data area starts below the failure row
  const dataTop = y0 + 16;
  const ty = (v: number): number => {
    const t = log
      ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))
      : (v - lo) / (hi - lo);
    return y1 - t * (y1 - dataTop);
  };
  const tx = (trial: number): number => (n <= 1 ? (x0 + x1) / 2 : x0 + (trial / (n - 1)) * (x1 - x0));
  const points: IPlotPoint[] = records.map((r, trial) => ({
    trial,
    x: tx(trial),
    y: ms[trial] === null ? failY : ty(ms[trial] as number),
    failed: ms[trial] === null,
    noisy: r.noisy,
    ms: ms[trial]
  }));
  const best = bestSoFar(records);
  const segs: string[] = [];
  let prevY: number | null = null;
  best.forEach((b, trial) => {
    if (b === null) {
      return;
    }
    const x = tx(trial);
    const y = ty(b * 1e3);
    if (prevY === null) {
      segs.push(`M${x.toFixed(1)},${y.toFixed(1)}`);
    } else {
      segs.push(`H${x.toFixed(1)}`);
      if (y !== prevY) {
        segs.push(`V${y.toFixed(1)}`);
      }
    }
    prevY = y;
  });
  if (segs.length && n > 1) {
    segs.push(`H${x1.toFixed(1)}`);
  }
  const xTicks: ITick[] = [];
  if (n > 0) {
    const step = n <= 1 ? 1 : Math.max(1, niceStep(n - 1, 6));
    for (let t = 0; t <= n - 1; t += step) {
      xTicks.push({ value: t, pos: tx(t), label: String(t) });
    }
  }
  const yTicks: ITick[] = [];
  if (ok.length) {
    if (log) {
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
        const v = Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) {
          yTicks.push({ value: v, pos: ty(v), label: fmt(v) });
        }
      }
      if (yTicks.length < 2) {
        yTicks.push({ value: lo, pos: ty(lo), label: fmt(lo) });
        yTicks.push({ value: hi, pos: ty(hi), label: fmt(hi) });
      }
    } else {
      const step = niceStep(hi - lo, 4);
      for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
        yTicks.push({ value: v, pos: ty(v), label: fmt(v) });
      }
    }
  }
  return { box, points, bestPath: segs.join(''), log, xTicks, yTicks, failY };
}

const SVG_NS = 'http://www.w3.org/2000/svg';

function el(doc: Document, name: string, attrs: Record<string, string | number>): SVGElement {
  const node = doc.createElementNS(SVG_NS, name) as SVGElement;
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, String(v));
  }
  return node;
}

/** The plot as an `<svg class="wb-db-plot">` with one `.wb-db-point` per trial. */
export function renderPlot(doc: Document, records: IRecord[], box: IPlotBox = DEFAULT_BOX): SVGSVGElement {
  const g = plotGeometry(records, box);
  const svg = el(doc, 'svg', {
    class: 'wb-db-plot',
    viewBox: `0 0 ${box.width} ${box.height}`,
    width: box.width,
    height: box.height,
    role: 'img'
  }) as SVGSVGElement;
  const x0 = box.left;
  const x1 = box.width - box.right;
  const y1 = box.height - box.bottom;
  svg.appendChild(el(doc, 'line', { class: 'wb-db-axis', x1: x0, y1: y1, x2: x1, y2: y1 }));
  svg.appendChild(el(doc, 'line', { class: 'wb-db-axis', x1: x0, y1: box.top, x2: x0, y2: y1 }));
  for (const t of g.xTicks) {
    const label = el(doc, 'text', { class: 'wb-db-tick', x: t.pos, y: y1 + 16, 'text-anchor': 'middle' });
    label.textContent = t.label;
    svg.appendChild(label);
  }
  for (const t of g.yTicks) {
    svg.appendChild(el(doc, 'line', { class: 'wb-db-grid', x1: x0, y1: t.pos, x2: x1, y2: t.pos }));
    const label = el(doc, 'text', { class: 'wb-db-tick', x: x0 - 6, y: t.pos + 4, 'text-anchor': 'end' });
    label.textContent = t.label;
    svg.appendChild(label);
  }
  const xl = el(doc, 'text', { class: 'wb-db-label', x: (x0 + x1) / 2, y: box.height - 6, 'text-anchor': 'middle' });
  xl.textContent = 'trial';
  svg.appendChild(xl);
  const yl = el(doc, 'text', {
    class: 'wb-db-label',
    x: 12,
    y: (box.top + y1) / 2,
    'text-anchor': 'middle',
    transform: `rotate(-90 12 ${(box.top + y1) / 2})`
  });
  yl.textContent = `median latency (ms${g.log ? ', log' : ''})`;
  svg.appendChild(yl);
  if (g.bestPath) {
    svg.appendChild(el(doc, 'path', { class: 'wb-db-best', d: g.bestPath, fill: 'none' }));
  }
  for (const p of g.points) {
    let node: SVGElement;
    if (p.failed) {
      const d = 4;
      node = el(doc, 'path', {
        class: 'wb-db-point wb-db-fail',
        d: `M${p.x - d},${p.y - d}L${p.x + d},${p.y + d}M${p.x - d},${p.y + d}L${p.x + d},${p.y - d}`
      });
    } else {
      node = el(doc, 'circle', {
        class: 'wb-db-point' + (p.noisy ? ' wb-db-noisy' : ''),
        cx: p.x.toFixed(1),
        cy: p.y.toFixed(1),
        r: 3.5
      });
    }
    node.setAttribute('data-trial', String(p.trial));
    const title = el(doc, 'title', {});
    const rec = records[p.trial];
    title.textContent = p.failed
      ? `trial ${p.trial}: ${rec.status}${rec.error ? ': ' + rec.error.slice(0, 200) : ''}`
      : `trial ${p.trial}: ${fmt(p.ms as number)} ms${p.noisy ? ' (noisy)' : ''}`;
    node.appendChild(title);
    svg.appendChild(node);
  }
  return svg;
}
