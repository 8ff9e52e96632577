import { editorNotebook, freeName, pyString, replayNotebook, scheduleStem, workloadCall, workloads } from '../notebook';
import { WorkloadPicker } from '../picker';

describe('notebook content', () => {
  it('opens the editor on a workload with its sizes', () => {
    const nb = editorNotebook('matmul', { M: 64 });
    expect(nb.nbformat).toBe(4);
    const code = nb.cells[1];
    expect(code.cell_type).toBe('code');
    expect(code.source).toBe(
      'from workbench import widgets\nimport workbench as wb\n\n' +
        'editor = widgets.ScheduleEditor(wb.workloads.matmul(M=64, N=128, K=128))\neditor'
    );
    expect(code.outputs).toEqual([]);
  });

  it('refuses unknown workloads, unknown sizes and non-integers', () => {
    expect(() => workloadCall('rm -rf')).toThrow(/no workload/);
    expect(() => workloadCall('matmul', { Q: 3 })).toThrow(/no size "Q"/);
    expect(() => workloadCall('matmul', { M: 1.5 })).toThrow(/positive integer/);
    expect(() => workloadCall('matmul', { M: 0 })).toThrow(/positive integer/);
  });

  it('replays a schedule file by name, quoted safely', () => {
    const nb = replayNotebook('my "odd"\\name.schedule.json');
    expect(nb.cells[1].source).toBe(
      'from workbench import widgets\n\n' +
        'stepper = widgets.TraceStepper("my \\"odd\\"\\\\name.schedule.json")\nstepper'
    );
    expect(pyString('a\nb')).toBe('"a\\nb"');
  });

  it('picks free names and stems', () => {
    expect(freeName('mm', ['x.ipynb'])).toBe('mm.ipynb');
    expect(freeName('mm', ['mm.ipynb', 'mm-1.ipynb'])).toBe('mm-2.ipynb');
    expect(scheduleStem('mm_relu.schedule.json')).toBe('mm_relu');
    expect(scheduleStem('plain.json')).toBe('plain');
  });

  it('knows every workload with integer sizes', () => {
    expect(workloads.map(w => w.name)).toContain('mm_relu');
    for (const w of workloads) {
      expect(Object.values(w.sizes).every(Number.isInteger)).toBe(true);
      expect(workloadCall(w.name)).toMatch(new RegExp(`^wb\\.workloads\\.${w.name}\\(`));
    }
  });
});

describe('workload picker', () => {
  it('shows the sizes of the chosen workload and reads them back', () => {
    const picker = new WorkloadPicker(document);
    document.body.appendChild(picker.node);
    expect(picker.getValue()).toEqual({ name: 'mm_relu', sizes: { M: 128, N: 128, K: 128 } });
    const select = picker.node.querySelector('select') as HTMLSelectElement;
    select.value = 'gemv';
    select.dispatchEvent(new Event('change'));
    const inputs = picker.node.querySelectorAll('input');
    expect(inputs.length).toBe(2);
    (inputs[0] as HTMLInputElement).value = '32';
    expect(picker.getValue()).toEqual({ name: 'gemv', sizes: { M: 32, K: 768 } });
  });
});
