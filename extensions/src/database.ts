/**
 * Reading a tuning database (a folder with `workloads.jsonl` and
 * `records.jsonl`, see workbench/search/database.py) the way the Python
 * `Database` does: one JSON object a line, a bad line skipped and counted
 * with the reason, never the whole file refused.
 */

export interface IWorkload {
  index: number;
  name: string;
  hash: string;
  flops: number | null;
}

export interface IRecord {
  /** 1-based line in records.jsonl */
  line: number;
  workload: number;
  status: string;
  error: string;
  runSecs: number[] | null;
  /** median seconds, null for a failed candidate */
  median: number | null;
  noisy: boolean;
  estimated: boolean;
  decisions: string;
  target: string;
  created: string;
}

export interface IDatabase {
  workloads: Map<number, IWorkload>;
  records: IRecord[];
  /** "records.jsonl line 3: <reason>", one per skipped line */
  problems: string[];
  /** whether workloads.jsonl was read (names, flop counts and index checks) */
  haveWorkloads: boolean;
}

const SHORT_KIND: Record<string, string> = {
  SamplePerfectTile: 'tile',
  SampleCategorical: 'cat',
  SampleComputeLocation: 'loc'
};

class Corrupt extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value);
}

/** The decisions of a trace's JSON as short text, e.g. `tile=[4,8] cat=2` (as Python's). */
export function decisionsSummary(trace: unknown): string {
  if (!Array.isArray(trace) || trace.length !== 2) {
    return '';
  }
  const [insts, decisions] = trace;
  if (!Array.isArray(insts) || !Array.isArray(decisions)) {
    return '';
  }
  const parts: string[] = [];
  for (const entry of decisions) {
    if (!Array.isArray(entry) || entry.length !== 2) {
      continue;
    }
    const [idx, value] = entry;
    let kind = '?';
    if (isInt(idx) && idx >= 0 && idx < insts.length && Array.isArray(insts[idx])) {
      kind = insts[idx].length ? String(insts[idx][0]) : '?';
    }
    parts.push(`${SHORT_KIND[kind] ?? kind}=${JSON.stringify(value)}`);
  }
  return parts.join(' ');
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function lines(text: string): [number, string][] {
  const parts = text.split('\n');
  if (parts[parts.length - 1] === '') {
    parts.pop();
  }
  return parts.map((line, n) => [n + 1, line]);
}

function decode(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch (e) {
    throw new Corrupt(`not JSON (${(e as Error).message})`);
  }
}

function field(obj: Record<string, unknown>, key: string, ok: boolean, what: string): void {
  if (!ok) {
    throw new Corrupt(`field '${key}' must be ${what}, got ${JSON.stringify(obj[key])}`);
  }
}

function parseWorkload(index: number, obj: unknown): IWorkload {
  if (!isObject(obj)) {
    throw new Corrupt('expected a JSON object');
  }
  const missing = ['hash', 'name', 'script'].filter(k => !(k in obj));
  if (missing.length) {
    throw new Corrupt(`missing field(s) ${missing.join(', ')}`);
  }
  for (const key of ['hash', 'name', 'script']) {
    field(obj, key, typeof obj[key] === 'string', 'a string');
  }
  const flops = obj.flops ?? null;
  field(obj, 'flops', flops === null || isInt(flops), 'an integer or null');
  return {
    index,
    name: obj.name as string,
    hash: obj.hash as string,
    flops: flops as number | null
  };
}

function parseRecord(
  line: number,
  obj: unknown,
  workloads: Map<number, IWorkload> | null
): IRecord {
  if (!isObject(obj)) {
    throw new Corrupt('expected a JSON object');
  }
  const missing = ['workload', 'trace', 'run_secs', 'status'].filter(k => !(k in obj));
  if (missing.length) {
    throw new Corrupt(`missing field(s) ${missing.join(', ')}`);
  }
  field(obj, 'workload', isInt(obj.workload), 'an integer');
  const workload = obj.workload as number;
  if (workloads && !workloads.has(workload)) {
    throw new Corrupt(
      `refers to workload ${workload}, which is not a valid line of workloads.jsonl`
    );
  }
  const trace = obj.trace;
  if (
    !Array.isArray(trace) ||
    trace.length < 1 ||
    trace.length > 2 ||
    !trace.every(x => Array.isArray(x))
  ) {
    throw new Corrupt("field 'trace' must be [[instructions], [decisions]]");
  }
  field(obj, 'status', typeof obj.status === 'string', 'a string');
  const status = obj.status as string;
  if (!status) {
    throw new Corrupt("field 'status' is empty");
  }
  let runSecs: number[] | null = null;
  if (obj.run_secs !== null) {
    const secs = obj.run_secs;
    if (
      !Array.isArray(secs) ||
      !secs.length ||
      !secs.every(s => typeof s === 'number' && Number.isFinite(s) && s >= 0)
    ) {
      throw new Corrupt("field 'run_secs' must be null or a non-empty list of seconds >= 0");
    }
    runSecs = secs as number[];
  } else if (status === 'ok') {
    throw new Corrupt("status 'ok' without run_secs");
  }
  for (const key of ['error', 'target', 'created']) {
    field(obj, key, obj[key] === undefined || typeof obj[key] === 'string', 'a string');
  }
  const args = obj.args_info ?? [];
  field(obj, 'args_info', Array.isArray(args), 'a list');
  for (const arg of args as unknown[]) {
    if (
      !Array.isArray(arg) ||
      arg.length !== 2 ||
      !Array.isArray(arg[0]) ||
      !arg[0].every(isInt) ||
      typeof arg[1] !== 'string'
    ) {
      throw new Corrupt("field 'args_info' must be a list of [shape, dtype]");
    }
  }
  for (const key of ['cv', 'foreign_load']) {
    const v = obj[key];
    const good = v === undefined || v === null || (typeof v === 'number' && v >= 0);
    field(obj, key, good, 'null or a number >= 0');
  }
  for (const key of ['noisy', 'estimated']) {
    field(obj, key, obj[key] === undefined || typeof obj[key] === 'boolean', 'true or false');
  }
  const ok = status === 'ok' && runSecs !== null;
  return {
    line,
    workload,
    status,
    error: (obj.error as string) ?? '',
    runSecs,
    median: ok ? median(runSecs as number[]) : null,
    noisy: obj.noisy === true,
    estimated: obj.estimated === true,
    decisions: decisionsSummary(trace),
    target: (obj.target as string) ?? 'c',
    created: (obj.created as string) ?? ''
  };
}

/**
 * Parse `records.jsonl` text, with `workloads.jsonl` text when the file is
 * there (null otherwise: records are then not checked against workloads).
 */
export function parseDatabase(records: string, workloads: string | null): IDatabase {
  const problems: string[] = [];
  const byIndex = new Map<number, IWorkload>();
  if (workloads !== null) {
    for (const [number, line] of lines(workloads)) {
      if (!line.trim()) {
        continue;
      }
      try {
        byIndex.set(number - 1, parseWorkload(number - 1, decode(line)));
      } catch (e) {
        if (!(e instanceof Corrupt)) {
          throw e;
        }
        problems.push(`workloads.jsonl line ${number}: ${e.message}`);
      }
    }
  }
  const out: IRecord[] = [];
  for (const [number, line] of lines(records)) {
    if (!line.trim()) {
      continue;
    }
    try {
      out.push(parseRecord(number, decode(line), workloads === null ? null : byIndex));
    } catch (e) {
      if (!(e instanceof Corrupt)) {
        throw e;
      }
      problems.push(`records.jsonl line ${number}: ${e.message}`);
    }
  }
  return { workloads: byIndex, records: out, problems, haveWorkloads: workloads !== null };
}

/** GFLOPS of a record, when its workload's flop count is known. */
export function gflops(db: IDatabase, record: IRecord): number | null {
  const flops = db.workloads.get(record.workload)?.flops;
  if (flops === null || flops === undefined || !record.median) {
    return null;
  }
  return flops / record.median / 1e9;
}

/** The best (lowest) latency so far at each record, null before the first success. */
export function bestSoFar(records: IRecord[]): (number | null)[] {
  let best: number | null = null;
  return records.map(r => {
    if (r.median !== null && (best === null || r.median < best)) {
      best = r.median;
    }
    return best;
  });
}
