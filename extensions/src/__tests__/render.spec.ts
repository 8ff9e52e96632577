import * as fs from 'fs';
import * as path from 'path';

import { parseDatabase } from '../database';
import { parseWorkbenchFile } from '../files';
import { renderDatabase, ScheduleView } from '../render';

const fixture = (name: string): string =>
  fs.readFileSync(path.join(__dirname, 'fixtures', name), 'utf-8');

function key(node: HTMLElement, k: string): void {
  node.dispatchEvent(new KeyboardEvent('keydown', { key: k, bubbles: true }));
}

describe('schedule viewer DOM', () => {
  it('lists steps, shows the function and the selected step diff', () => {
    const root = document.createElement('div');
    const view = new ScheduleView(document, root);
    view.show(parseWorkbenchFile(fixture('mm_relu.schedule.json')));
    expect(root.classList.contains('wb-schedule-viewer')).toBe(true);
    expect(root.querySelector('.wb-viewer-function')?.textContent).toContain('def mm_relu');
    const steps = root.querySelectorAll('.wb-viewer-step');
    expect(steps.length).toBe(6);
    expect(steps[0].classList.contains('wb-viewer-step-selected')).toBe(true);
    // step 0 is a lookup: no change
    expect(root.querySelectorAll('.wb-diff-add, .wb-diff-del').length).toBe(0);
    (steps[2] as HTMLElement).click(); // the split
    expect(steps[2].classList.contains('wb-viewer-step-selected')).toBe(true);
    expect(steps[0].classList.contains('wb-viewer-step-selected')).toBe(false);
    const added = root.querySelectorAll('.wb-viewer-diff .wb-diff-add');
    const removed = root.querySelectorAll('.wb-viewer-diff .wb-diff-del');
    expect(added.length).toBeGreaterThan(0);
    expect(removed.length).toBeGreaterThan(0);
    expect([...added].some(n => /j_0|j0|8/.test(n.textContent ?? ''))).toBe(true);
  });

  it('moves through the steps with the arrow keys', () => {
    const root = document.createElement('div');
    const view = new ScheduleView(document, root);
    view.show(parseWorkbenchFile(fixture('mm_relu.schedule.json')));
    key(root, 'ArrowDown');
    key(root, 'ArrowDown');
    expect(view.selectedIndex).toBe(2);
    key(root, 'ArrowUp');
    expect(view.selectedIndex).toBe(1);
    key(root, 'ArrowUp');
    key(root, 'ArrowUp');
    expect(view.selectedIndex).toBe(0);
    key(root, 'End');
    expect(view.selectedIndex).toBe(5);
    key(root, 'ArrowDown');
    expect(view.selectedIndex).toBe(5);
    expect(root.querySelectorAll('.wb-viewer-step-selected').length).toBe(1);
  });

  it('shows a bare trace with a note that the IR needs a schedule file', () => {
    const root = document.createElement('div');
    new ScheduleView(document, root).show(parseWorkbenchFile(fixture('mm_relu.trace.json')));
    expect(root.querySelectorAll('.wb-viewer-step').length).toBe(6);
    expect(root.querySelector('.wb-viewer-function')).toBeNull();
    expect(root.querySelector('.wb-viewer-noir')?.textContent).toMatch(/needs a schedule file/);
    expect(root.querySelector('.wb-viewer-diff')).toBeNull();
  });

  it('shows a message for a file that is not ours', () => {
    const root = document.createElement('div');
    new ScheduleView(document, root).show(parseWorkbenchFile('{"name": "package"}'));
    expect(root.querySelector('.wb-viewer-message')?.textContent).toMatch(/not a Schedule Workbench file/);
    expect(root.querySelectorAll('.wb-viewer-step').length).toBe(0);
  });
});

describe('database viewer DOM', () => {
  it('renders the table, the plot and the skipped lines', () => {
    const db = parseDatabase(fixture('db/records.jsonl'), fixture('db/workloads.jsonl'));
    const root = document.createElement('div');
    renderDatabase(document, root, db);
    expect(root.classList.contains('wb-db-viewer')).toBe(true);
    const rows = root.querySelectorAll('.wb-db-table tbody tr');
    expect(rows.length).toBe(6);
    expect(rows[4].classList.contains('wb-db-failed')).toBe(true);
    expect(rows[4].textContent).toContain('build_error');
    expect(root.querySelectorAll('svg.wb-db-plot .wb-db-point').length).toBe(6);
    expect(root.querySelector('.wb-db-problems summary')?.textContent).toBe('skipped 2 bad lines');
    expect(root.querySelector('.wb-db-best-row')?.getAttribute('data-trial')).toBe('3');
  });

  it('filters by workload when there are several', () => {
    const workloads = [
      '{"hash": "a", "name": "f", "script": "s", "flops": 1000}',
      '{"hash": "b", "name": "g", "script": "s", "flops": null}'
    ].join('\n');
    const records = [0, 1, 1]
      .map(w => `{"workload": ${w}, "trace": [[], []], "run_secs": [0.001], "status": "ok"}`)
      .join('\n');
    const db = parseDatabase(records, workloads);
    const root = document.createElement('div');
    let chosen: number | null = null;
    const draw = (w: number | null): void => {
      chosen = w;
      renderDatabase(document, root, db, w, draw);
    };
    draw(null);
    expect(root.querySelectorAll('.wb-db-table tbody tr').length).toBe(3);
    const select = root.querySelector('select.wb-db-workload') as HTMLSelectElement;
    select.value = '1';
    select.dispatchEvent(new Event('change'));
    expect(chosen).toBe(1);
    expect(root.querySelectorAll('.wb-db-table tbody tr').length).toBe(2);
    expect(root.querySelectorAll('.wb-db-point').length).toBe(2);
  });
});
