import * as fs from 'fs';
import * as path from 'path';

import { bestSoFar, decisionsSummary, gflops, parseDatabase } from '../database';

const fixture = (name: string): string =>
  fs.readFileSync(path.join(__dirname, 'fixtures', name), 'utf-8');
const expected = JSON.parse(fixture('expected.json'));

describe('tuning databases', () => {
  const db = parseDatabase(fixture('db/records.jsonl'), fixture('db/workloads.jsonl'));

  it('reads the records the Python Database reads and skips the same lines', () => {
    expect(db.records.length).toBe(expected.records);
    expect(db.problems.length).toBe(expected.skipped);
    expect(db.problems.map(p => p.split(':')[0])).toEqual(
      expected.problems.map((p: string) => p.split(':')[0])
    );
    expect(db.problems[1]).toMatch(/refers to workload 7/);
  });

  it('computes latency, GFLOPS, status and noise as the Python table does', () => {
    const table = expected.table as Record<string, unknown>[];
    db.records.forEach((r, n) => {
      const row = table[n];
      expect(r.status).toBe(row.status);
      expect(r.decisions).toBe(row.decisions);
      if (row.median_ms === null) {
        expect(r.median).toBeNull();
      } else {
        expect((r.median as number) * 1e3).toBeCloseTo(row.median_ms as number, 9);
        expect(gflops(db, r) as number).toBeCloseTo(row.gflops as number, 6);
      }
    });
    expect(db.records.map(r => r.noisy)).toEqual([false, false, false, false, false, true]);
  });

  it('reads records without workloads.jsonl, unchecked', () => {
    const alone = parseDatabase(fixture('db/records.jsonl'), null);
    expect(alone.haveWorkloads).toBe(false);
    expect(alone.records.length).toBe(expected.records + 1);
    expect(gflops(alone, alone.records[0])).toBeNull();
  });

  it('skips and explains malformed records', () => {
    const text = [
      '{"workload": 0, "trace": [[], []], "run_secs": null, "status": "ok"}',
      '{"workload": 0, "trace": [[], []], "run_secs": [-1], "status": "ok"}',
      '{"workload": 0, "trace": "x", "run_secs": null, "status": "crash"}',
      '[1, 2]',
      '',
      '{"workload": 0, "trace": [[], []], "run_secs": null, "status": "timeout", "error": "slow"}'
    ].join('\n');
    const bad = parseDatabase(text, '{"hash": "h", "name": "f", "script": "s", "flops": 10}\n');
    expect(bad.records.map(r => r.line)).toEqual([6]);
    expect(bad.problems).toEqual([
      "records.jsonl line 1: status 'ok' without run_secs",
      "records.jsonl line 2: field 'run_secs' must be null or a non-empty list of seconds >= 0",
      "records.jsonl line 3: field 'trace' must be [[instructions], [decisions]]",
      'records.jsonl line 4: expected a JSON object'
    ]);
  });

  it('summarises decisions as Python does', () => {
    expect(
      decisionsSummary([[['SamplePerfectTile', ['l1'], [2, 16], ['v2', 'v3']]], [[0, [4, 4]]]])
    ).toBe('tile=[4,4]');
  });

  it('tracks the best latency so far', () => {
    expect(bestSoFar(db.records).map(b => (b === null ? null : b * 1e3))).toEqual(
      db.records.map((_, n) =>
        Math.min(...db.records.slice(0, n + 1).filter(r => r.median !== null).map(r => (r.median as number) * 1e3))
      )
    );
  });
});
