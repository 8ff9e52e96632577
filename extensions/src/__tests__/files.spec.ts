import * as fs from 'fs';
import * as path from 'path';

import { irBefore, parseWorkbenchFile } from '../files';
import { formatInstruction, parseTrace } from '../trace';

const fixture = (name: string): string =>
  fs.readFileSync(path.join(__dirname, 'fixtures', name), 'utf-8');
const expected = JSON.parse(fixture('expected.json'));

describe('schedule files', () => {
  it('reads the function, the steps and their IR', () => {
    const view = parseWorkbenchFile(fixture('mm_relu.schedule.json'));
    if (view.kind !== 'schedule') {
      throw new Error(`expected a schedule, got ${JSON.stringify(view)}`);
    }
    expect(view.funcName).toBe('mm_relu');
    expect(view.hasIR).toBe(true);
    expect(view.steps.map(s => s.instruction)).toEqual(expected.trace_steps);
    expect(view.start).toContain('def mm_relu');
    expect(view.steps[2].kind).toBe('Split');
    expect(irBefore(view, 0)).toBe(view.start);
    expect(irBefore(view, 3)).toBe(view.steps[2].ir);
  });

  it('falls back to the trace when "steps" is missing or malformed', () => {
    const data = JSON.parse(fixture('mm_relu.schedule.json'));
    delete data.steps;
    const bare = parseWorkbenchFile(JSON.stringify(data));
    expect(bare.kind).toBe('schedule');
    if (bare.kind === 'schedule') {
      expect(bare.hasIR).toBe(false);
      expect(bare.missingIR).toMatch(/no "steps"/);
      expect(bare.steps.map(s => s.instruction)).toEqual(expected.trace_steps);
      expect(irBefore(bare, 1)).toBeUndefined();
    }
    data.steps = { start: 'x', items: [{ instruction: 'i' }] };
    const broken = parseWorkbenchFile(JSON.stringify(data));
    expect(broken.kind === 'schedule' && broken.missingIR).toMatch(/step 0 .* lacks/);
    data.steps = { start: 'x', items: [] };
    const short = parseWorkbenchFile(JSON.stringify(data));
    expect(short.kind === 'schedule' && short.missingIR).toMatch(/0 items for 6/);
  });

  it('says what is wrong with a file that is not ours', () => {
    expect(parseWorkbenchFile('{"a": 1}')).toEqual({
      kind: 'error',
      message: expect.stringMatching(/not a Schedule Workbench file/)
    });
    expect(parseWorkbenchFile('{not json')).toEqual({
      kind: 'error',
      message: expect.stringMatching(/not valid JSON/)
    });
    expect(parseWorkbenchFile('[[["Split", 1]], []]')).toEqual({
      kind: 'error',
      message: expect.stringMatching(/instruction 0 is not/)
    });
    const noModule = parseWorkbenchFile('{"format": "workbench-schedule", "trace": [[], []]}');
    expect(noModule).toEqual({ kind: 'error', message: expect.stringMatching(/no "module"/) });
  });
});

describe('bare traces', () => {
  it('prints each instruction as the Python trace does', () => {
    const view = parseWorkbenchFile(fixture('mm_relu.trace.json'));
    expect(view.kind).toBe('trace');
    if (view.kind === 'trace') {
      expect(view.steps.map(s => s.instruction)).toEqual(expected.trace_steps);
    }
  });

  it('prints decisions, unknown kinds and empty outputs', () => {
    const trace = parseTrace([
      [
        ['SamplePerfectTile', ['l1'], [2, 16], ['v2', 'v3']],
        ['MadeUpKind', ['b0', 3], ['x'], []],
        ['Fuse', ['l1', 'l2'], [1], ['l9']]
      ],
      [[0, [4, 8]]]
    ]);
    expect(trace.instructions.map(formatInstruction)).toEqual([
      'v2, v3 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=16, decision=[4, 8])',
      'sch.made_up_kind(b0, 3, "x")',
      'l9 = sch.fuse(l1, l2, preserve_unit_iters=True)'
    ]);
  });

  it('refuses decisions that point nowhere', () => {
    expect(() => parseTrace([[], [[3, 1]]])).toThrow(/decision 0/);
  });
});
