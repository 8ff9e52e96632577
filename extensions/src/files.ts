/**
 * Reading the files the viewers show: schedule files (`"format":
 * "workbench-schedule"`, with the optional `"steps"` key carrying each step's
 * IR) and bare traces (TVM's `[[insts], [decisions]]`). Parsing only: nothing
 * in a file is executed.
 */

import { formatInstruction, parseTrace, TraceFormatError } from './trace';

export const SCHEDULE_FORMAT = 'workbench-schedule';

/** One step of a schedule: its instruction and, when the file has it, its IR after. */
export interface IStep {
  instruction: string;
  kind: string;
  /** the function's text after this step, when the file carries it */
  ir?: string;
}

export interface IScheduleView {
  kind: 'schedule';
  funcName: string;
  syntax: string;
  target: string | null;
  created: string;
  note: string | null;
  /** the unscheduled function (the "start" of steps, else the "module" text) */
  start: string;
  /** the steps, with IR when the file's "steps" key is present and sound */
  steps: IStep[];
  /** whether each step has its IR */
  hasIR: boolean;
  /** why the steps have no IR, when they do not */
  missingIR?: string;
  measurement: Record<string, unknown> | null;
}

export interface ITraceView {
  kind: 'trace';
  steps: IStep[];
}

export interface IErrorView {
  kind: 'error';
  message: string;
}

export type FileView = IScheduleView | ITraceView | IErrorView;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stepsFromTrace(value: unknown): IStep[] {
  return parseTrace(value).instructions.map(inst => ({
    instruction: formatInstruction(inst),
    kind: inst.kind
  }));
}

/** The "steps" key, checked; a string saying what is wrong when it is not usable. */
function readSteps(
  value: unknown,
  count: number
): { start: string; items: IStep[] } | string {
  if (!isObject(value)) {
    return 'its "steps" is not an object';
  }
  const { start, items } = value;
  if (typeof start !== 'string') {
    return 'its "steps" has no "start" text';
  }
  if (!Array.isArray(items)) {
    return 'its "steps" has no "items" list';
  }
  const steps: IStep[] = [];
  for (let n = 0; n < items.length; n++) {
    const item = items[n];
    if (
      !isObject(item) ||
      typeof item.instruction !== 'string' ||
      typeof item.ir !== 'string'
    ) {
      return `step ${n} of its "steps" lacks "instruction" or "ir" text`;
    }
    steps.push({
      instruction: item.instruction,
      kind: typeof item.kind === 'string' ? item.kind : '',
      ir: item.ir
    });
  }
  if (steps.length !== count) {
    return `its "steps" has ${steps.length} items for ${count} trace instructions`;
  }
  return { start, items: steps };
}

/**
 * What a viewer shows for `text`: a schedule file, a bare trace, or an error
 * message saying why the file is neither.
 */
export function parseWorkbenchFile(text: string): FileView {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { kind: 'error', message: `This file is not valid JSON (${(e as Error).message}).` };
  }
  try {
    if (Array.isArray(value)) {
      return { kind: 'trace', steps: stepsFromTrace(value) };
    }
    if (!isObject(value) || value.format !== SCHEDULE_FORMAT) {
      return {
        kind: 'error',
        message:
          'This is not a Schedule Workbench file: a schedule file has ' +
          `"format": "${SCHEDULE_FORMAT}", a trace is [[instructions], [decisions]].`
      };
    }
    if (typeof value.module !== 'string') {
      return { kind: 'error', message: 'This schedule file has no "module" text.' };
    }
    const traceSteps = stepsFromTrace(value.trace);
    const view: IScheduleView = {
      kind: 'schedule',
      funcName: typeof value.func_name === 'string' ? value.func_name : '',
      syntax: typeof value.syntax === 'string' ? value.syntax : '',
      target: typeof value.target === 'string' ? value.target : null,
      created: typeof value.created === 'string' ? value.created : '',
      note: typeof value.note === 'string' ? value.note : null,
      start: value.module,
      steps: traceSteps,
      hasIR: false,
      measurement: isObject(value.measurement) ? value.measurement : null
    };
    if (value.steps === undefined) {
      view.missingIR =
        'This schedule file carries no per-step IR (no "steps" key: it was written by ' +
        'an older version, or the IR texts were too large).';
    } else {
      const steps = readSteps(value.steps, traceSteps.length);
      if (typeof steps === 'string') {
        view.missingIR = `The per-step IR cannot be shown: ${steps}.`;
      } else {
        view.start = steps.start;
        view.steps = steps.items.map((s, n) => ({
          ...s,
          kind: s.kind || traceSteps[n].kind
        }));
        view.hasIR = true;
      }
    }
    return view;
  } catch (e) {
    if (e instanceof TraceFormatError) {
      return { kind: 'error', message: `The trace cannot be read: ${e.message}.` };
    }
    throw e;
  }
}

/** The IR before step `index` (the start for step 0), or undefined without IR. */
export function irBefore(view: IScheduleView, index: number): string | undefined {
  if (!view.hasIR) {
    return undefined;
  }
  return index === 0 ? view.start : view.steps[index - 1].ir;
}
