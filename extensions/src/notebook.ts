/**
 * The notebooks the commands create: one with the schedule editor on a chosen
 * workload, one replaying a schedule file in a TraceStepper. Only known
 * workload names and integer sizes go into the code; file names are written
 * as Python string literals.
 */

import WORKLOADS from './workloads.json';

export interface IWorkloadInfo {
  name: string;
  sizes: Record<string, number>;
}

/** The workloads of `wb.workloads` with their default sizes (checked by a Python test). */
export const workloads: IWorkloadInfo[] = WORKLOADS as unknown as IWorkloadInfo[];

export interface INotebookContent {
  cells: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  nbformat: number;
  nbformat_minor: number;
}

function cell(cellType: 'code' | 'markdown', source: string): Record<string, unknown> {
  const base: Record<string, unknown> = {
    cell_type: cellType,
    metadata: {},
    source
  };
  if (cellType === 'code') {
    base.execution_count = null;
    base.outputs = [];
  }
  return base;
}

function notebook(cells: Record<string, unknown>[]): INotebookContent {
  return {
    cells,
    metadata: {
      kernelspec: { display_name: 'Python 3 (ipykernel)', language: 'python', name: 'python3' },
      language_info: { name: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** A Python string literal for `text` (JSON's escapes are all valid in Python). */
export function pyString(text: string): string {
  return JSON.stringify(text);
}

/** The workload call, e.g. `wb.workloads.matmul(M=128, N=128, K=128)`; throws on unknown input. */
export function workloadCall(name: string, sizes: Record<string, number> = {}): string {
  const info = workloads.find(w => w.name === name);
  if (!info) {
    throw new Error(`no workload named ${JSON.stringify(name)}`);
  }
  const args = Object.keys(info.sizes).map(key => {
    const value = key in sizes ? sizes[key] : info.sizes[key];
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`${name}: size ${key} must be a positive integer, got ${value}`);
    }
    return `${key}=${value}`;
  });
  for (const key of Object.keys(sizes)) {
    if (!(key in info.sizes)) {
      throw new Error(`${name} has no size ${JSON.stringify(key)}`);
    }
  }
  return `wb.workloads.${name}(${args.join(', ')})`;
}

/** A notebook that opens the schedule editor on a workload. */
export function editorNotebook(name: string, sizes: Record<string, number> = {}): INotebookContent {
  const call = workloadCall(name, sizes);
  return notebook([
    cell(
      'markdown',
      `# Schedule workbench: \`${name}\`\n\nRun the cell below to open the editor; ` +
        'pick a loop in the tree, choose a primitive and apply it.'
    ),
    cell(
      'code',
      'from workbench import widgets\nimport workbench as wb\n\n' +
        `editor = widgets.ScheduleEditor(${call})\neditor`
    )
  ]);
}

/** A notebook (saved beside `fileName`) that replays the schedule file in a TraceStepper. */
export function replayNotebook(fileName: string): INotebookContent {
  return notebook([
    cell(
      'markdown',
      `# Replaying \`${fileName.replace(/`/g, "'")}\`\n\nStep through the schedule file's ` +
        'trace one instruction at a time.'
    ),
    cell(
      'code',
      'from workbench import widgets\n\n' + `stepper = widgets.TraceStepper(${pyString(fileName)})\nstepper`
    )
  ]);
}

/**
 * A file name in `existing` not taken yet: `<stem>.ipynb`, else `<stem>-1.ipynb`, ...
 */
export function freeName(stem: string, existing: Iterable<string>): string {
  const taken = new Set(existing);
  let name = `${stem}.ipynb`;
  for (let n = 1; taken.has(name); n++) {
    name = `${stem}-${n}.ipynb`;
  }
  return name;
}

/** The stem of a schedule file's name: `mm_relu.schedule.json` -> `mm_relu`. */
export function scheduleStem(fileName: string): string {
  return fileName.replace(/(\.schedule)?\.json$/i, '') || 'schedule';
}
