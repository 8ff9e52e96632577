/**
 * The viewers' DOM, built from parsed files with plain DOM calls (no
 * JupyterLab imports), so jest renders them in jsdom. Class names are the
 * contract the browser test relies on (see the extension's README).
 */

import { diffStats, lineDiff } from './diff';
import { FileView, irBefore, IScheduleView, ITraceView } from './files';
import { gflops, IDatabase, IRecord } from './database';
import { renderPlot } from './plot';

function h(
  doc: Document,
  tag: string,
  cls = '',
  text?: string,
  attrs: Record<string, string> = {}
): HTMLElement {
  const node = doc.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, v);
  }
  return node;
}

/** A message in place of a viewer (not our file, malformed, unreadable). */
export function renderMessage(doc: Document, root: HTMLElement, message: string): void {
  root.replaceChildren(h(doc, 'div', 'wb-viewer-message', message));
}

/**
 * The schedule/trace viewer. Holds the selected step; `select` moves it,
 * ArrowUp/ArrowDown on the root do too.
 */
export class ScheduleView {
  readonly root: HTMLElement;
  private doc: Document;
  private view: FileView | null = null;
  private selected = 0;
  private stepNodes: HTMLElement[] = [];
  private detail: HTMLElement | null = null;

  constructor(doc: Document, root: HTMLElement) {
    this.doc = doc;
    this.root = root;
    root.classList.add('wb-schedule-viewer');
    root.tabIndex = 0;
    root.addEventListener('keydown', event => this.onKey(event));
  }

  get selectedIndex(): number {
    return this.selected;
  }

  get stepCount(): number {
    return this.view && this.view.kind !== 'error' ? this.view.steps.length : 0;
  }

  /** Show `view` (keeps the selection when the new file has as many steps). */
  show(view: FileView): void {
    const keep = this.view && view.kind !== 'error' && this.selected < view.steps.length;
    this.view = view;
    if (!keep) {
      this.selected = 0;
    }
    const doc = this.doc;
    this.stepNodes = [];
    this.detail = null;
    if (view.kind === 'error') {
      renderMessage(doc, this.root, view.message);
      return;
    }
    const parts: HTMLElement[] = [this.header(view)];
    if (view.kind === 'schedule') {
      const fn = h(doc, 'details', 'wb-viewer-function-box', undefined, { open: '' });
      fn.appendChild(h(doc, 'summary', '', 'The function, unscheduled'));
      fn.appendChild(h(doc, 'pre', 'wb-viewer-function', view.start));
      parts.push(fn);
    }
    const body = h(doc, 'div', 'wb-viewer-body');
    const list = h(doc, 'ol', 'wb-viewer-steps', undefined, { start: '0' });
    view.steps.forEach((step, n) => {
      const item = h(doc, 'li', 'wb-viewer-step', undefined, { 'data-index': String(n) });
      item.appendChild(h(doc, 'code', '', step.instruction));
      item.addEventListener('click', () => {
        this.select(n);
        this.root.focus();
      });
      list.appendChild(item);
      this.stepNodes.push(item);
    });
    if (!view.steps.length) {
      list.appendChild(h(doc, 'li', 'wb-viewer-empty', 'The trace has no instructions.'));
    }
    this.detail = h(doc, 'div', 'wb-viewer-detail');
    body.append(list, this.detail);
    parts.push(body);
    this.root.replaceChildren(...parts);
    this.select(this.selected);
  }

  private header(view: IScheduleView | ITraceView): HTMLElement {
    const doc = this.doc;
    const head = h(doc, 'div', 'wb-viewer-header');
    const n = view.steps.length;
    if (view.kind === 'schedule') {
      head.appendChild(
        h(doc, 'span', 'wb-viewer-title', `Schedule of ${view.funcName || 'a function'}`)
      );
      const facts = [`${n} step${n === 1 ? '' : 's'}`];
      if (view.target) {
        facts.push(`target ${view.target}`);
      }
      if (view.syntax) {
        facts.push(`syntax ${view.syntax}`);
      }
      if (view.created) {
        facts.push(`saved ${view.created}`);
      }
      const m = view.measurement;
      if (m && typeof m.median === 'number') {
        facts.push(`median ${(m.median * 1e3).toPrecision(3)} ms`);
      }
      head.appendChild(h(doc, 'span', 'wb-viewer-facts', facts.join(' · ')));
      if (view.note) {
        head.appendChild(h(doc, 'div', 'wb-viewer-note', view.note));
      }
      if (!view.hasIR && view.missingIR) {
        head.appendChild(h(doc, 'div', 'wb-viewer-warning', view.missingIR));
      }
    } else {
      head.appendChild(h(doc, 'span', 'wb-viewer-title', 'Trace'));
      head.appendChild(
        h(doc, 'span', 'wb-viewer-facts', `${n} instruction${n === 1 ? '' : 's'}`)
      );
      head.appendChild(
        h(
          doc,
          'div',
          'wb-viewer-warning',
          'A bare trace carries no IR. To see each step\'s IR, open a schedule file ' +
            '(sch.save("name.schedule.json"), or the editor\'s "Download schedule" button).'
        )
      );
    }
    return head;
  }

  /** Select step `index` (clamped) and show its diff. */
  select(index: number): void {
    const view = this.view;
    if (!view || view.kind === 'error' || !this.detail) {
      return;
    }
    const count = view.steps.length;
    if (!count) {
      this.detail.replaceChildren();
      return;
    }
    this.selected = Math.max(0, Math.min(count - 1, index));
    this.stepNodes.forEach((node, n) => {
      node.classList.toggle('wb-viewer-step-selected', n === this.selected);
      node.setAttribute('aria-selected', n === this.selected ? 'true' : 'false');
    });
    const selectedNode = this.stepNodes[this.selected];
    if (selectedNode && typeof selectedNode.scrollIntoView === 'function') {
      selectedNode.scrollIntoView({ block: 'nearest' });
    }
    this.detail.replaceChildren(...this.detailFor(view, this.selected));
  }

  private detailFor(view: IScheduleView | ITraceView, index: number): HTMLElement[] {
    const doc = this.doc;
    const step = view.steps[index];
    const title = h(doc, 'div', 'wb-viewer-step-title');
    title.appendChild(h(doc, 'span', '', `step ${index}: `));
    title.appendChild(h(doc, 'code', '', step.instruction));
    const before = view.kind === 'schedule' ? irBefore(view, index) : undefined;
    if (view.kind === 'trace' || before === undefined || step.ir === undefined) {
      return [
        title,
        h(
          doc,
          'div',
          'wb-viewer-noir',
          view.kind === 'trace'
            ? 'No IR: a bare trace lists instructions only; the IR needs a schedule file.'
            : 'No IR for this step in this file.'
        )
      ];
    }
    const lines = lineDiff(before, step.ir);
    const stats = diffStats(lines);
    const summary = h(
      doc,
      'div',
      'wb-viewer-diff-summary',
      stats.added || stats.removed
        ? `+${stats.added} / -${stats.removed} lines`
        : 'no change to the IR (a lookup step)'
    );
    const pre = h(doc, 'pre', 'wb-viewer-diff');
    for (const line of lines) {
      const cls = line.kind === 'add' ? 'wb-diff-add' : line.kind === 'del' ? 'wb-diff-del' : 'wb-diff-same';
      const mark = line.kind === 'add' ? '+ ' : line.kind === 'del' ? '- ' : '  ';
      pre.appendChild(h(doc, 'div', `wb-diff-line ${cls}`, mark + line.text));
    }
    return [title, summary, pre];
  }

  private onKey(event: KeyboardEvent): void {
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      if (!this.stepCount) {
        return;
      }
      event.preventDefault();
      event.stopPropagation();
      this.select(this.selected + (event.key === 'ArrowDown' ? 1 : -1));
    } else if (event.key === 'Home' || event.key === 'End') {
      if (!this.stepCount) {
        return;
      }
      event.preventDefault();
      this.select(event.key === 'Home' ? 0 : this.stepCount - 1);
    }
  }
}

function ms(record: IRecord): string {
  return record.median === null ? '' : (record.median * 1e3).toPrecision(4);
}

/** The database viewer: summary, the latency plot and the candidates table. */
export function renderDatabase(
  doc: Document,
  root: HTMLElement,
  db: IDatabase,
  workloadFilter: number | null = null,
  onFilter?: (workload: number | null) => void
): void {
  root.classList.add('wb-db-viewer');
  const records =
    workloadFilter === null ? db.records : db.records.filter(r => r.workload === workloadFilter);
  const parts: HTMLElement[] = [];
  const head = h(doc, 'div', 'wb-db-header');
  const failed = records.filter(r => r.median === null).length;
  const noisy = records.filter(r => r.noisy).length;
  let bestIndex = -1;
  records.forEach((r, n) => {
    if (r.median !== null && (bestIndex < 0 || r.median < (records[bestIndex].median as number))) {
      bestIndex = n;
    }
  });
  const facts = [`${records.length} candidate${records.length === 1 ? '' : 's'}`];
  if (failed) {
    facts.push(`${failed} failed`);
  }
  if (noisy) {
    facts.push(`${noisy} noisy`);
  }
  if (bestIndex >= 0) {
    const best = records[bestIndex];
    const g = gflops(db, best);
    facts.push(`best ${ms(best)} ms (trial ${bestIndex}${g === null ? '' : `, ${g.toPrecision(3)} GFLOPS`})`);
  }
  if (records.some(r => r.estimated)) {
    facts.push('includes emulator estimates (not measurements)');
  }
  head.appendChild(h(doc, 'span', 'wb-db-title', 'Tuning database'));
  head.appendChild(h(doc, 'span', 'wb-db-facts', facts.join(' · ')));
  if (!db.haveWorkloads) {
    head.appendChild(
      h(doc, 'div', 'wb-viewer-warning', 'No workloads.jsonl beside this file: workload names and GFLOPS are unknown.')
    );
  }
  if (db.problems.length) {
    const box = h(doc, 'details', 'wb-db-problems');
    box.appendChild(
      h(doc, 'summary', '', `skipped ${db.problems.length} bad line${db.problems.length === 1 ? '' : 's'}`)
    );
    const list = h(doc, 'ul');
    for (const p of db.problems.slice(0, 100)) {
      list.appendChild(h(doc, 'li', '', p));
    }
    box.appendChild(list);
    head.appendChild(box);
  }
  if (db.workloads.size > 1 && onFilter) {
    const select = h(doc, 'select', 'wb-db-workload') as HTMLSelectElement;
    select.appendChild(h(doc, 'option', '', 'all workloads', { value: '' }));
    for (const w of db.workloads.values()) {
      const opt = h(doc, 'option', '', `${w.index}: ${w.name}`, { value: String(w.index) });
      if (w.index === workloadFilter) {
        opt.setAttribute('selected', '');
      }
      select.appendChild(opt);
    }
    select.addEventListener('change', () => onFilter(select.value === '' ? null : Number(select.value)));
    head.appendChild(select);
  }
  parts.push(head);
  if (records.length) {
    parts.push(renderPlot(doc, records) as unknown as HTMLElement);
  }
  const table = h(doc, 'table', 'wb-db-table');
  const columns = ['trial', 'workload', 'status', 'latency (ms)', 'GFLOPS', 'noisy', 'decisions'];
  const thead = h(doc, 'thead');
  const hr = h(doc, 'tr');
  for (const c of columns) {
    hr.appendChild(h(doc, 'th', '', c));
  }
  thead.appendChild(hr);
  const tbody = h(doc, 'tbody');
  records.forEach((r, n) => {
    const g = gflops(db, r);
    const w = db.workloads.get(r.workload);
    const row = h(doc, 'tr', r.median === null ? 'wb-db-failed' : n === bestIndex ? 'wb-db-best-row' : '', undefined, {
      'data-trial': String(n),
      'data-line': String(r.line)
    });
    const cells = [
      String(n),
      w ? w.name : String(r.workload),
      r.status,
      ms(r),
      g === null ? '' : g.toPrecision(4),
      r.noisy ? 'noisy' : '',
      r.decisions
    ];
    for (const c of cells) {
      row.appendChild(h(doc, 'td', '', c));
    }
    if (r.error) {
      row.title = r.error;
    }
    tbody.appendChild(row);
  });
  table.append(thead, tbody);
  if (!records.length) {
    parts.push(h(doc, 'div', 'wb-viewer-message', 'No candidates recorded yet.'));
  }
  parts.push(table);
  root.replaceChildren(...parts);
}
