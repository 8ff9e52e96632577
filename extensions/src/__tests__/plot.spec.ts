import { IRecord } from '../database';
import { DEFAULT_BOX, plotGeometry, renderPlot } from '../plot';

function rec(median: number | null, noisy = false): IRecord {
  return {
    line: 1,
    workload: 0,
    status: median === null ? 'crash' : 'ok',
    error: '',
    runSecs: median === null ? null : [median],
    median,
    noisy,
    estimated: false,
    decisions: '',
    target: 'c',
    created: ''
  };
}

describe('plot geometry', () => {
  const records = [rec(4e-3), rec(null), rec(2e-3), rec(3e-3, true)];
  const g = plotGeometry(records);

  it('places trials left to right and lower latency lower on the page', () => {
    const xs = g.points.map(p => p.x);
    expect(xs[0]).toBe(DEFAULT_BOX.left);
    expect(xs[3]).toBe(DEFAULT_BOX.width - DEFAULT_BOX.right);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    expect(g.points[0].y).toBeLessThan(g.points[2].y); // 4 ms above 2 ms
    // the fastest is the lowest point, inside the plot area
    const bottom = DEFAULT_BOX.height - DEFAULT_BOX.bottom;
    expect(Math.max(...g.points.map(p => p.y))).toBe(g.points[2].y);
    expect(g.points[2].y).toBeLessThan(bottom);
    expect(g.points[2].y).toBeGreaterThan(bottom - 20);
  });

  it('puts failures on the top row', () => {
    expect(g.points[1].failed).toBe(true);
    expect(g.points[1].y).toBe(g.failY);
    expect(g.points.filter(p => p.y < g.points[0].y)).toEqual([g.points[1]]);
  });

  it('draws the best so far as a descending step line', () => {
    expect(g.bestPath.startsWith(`M${DEFAULT_BOX.left}.0,`)).toBe(true);
    expect(g.bestPath).toMatch(/H[\d.]+V[\d.]+/);
    const ys = [...g.bestPath.matchAll(/[MV][\d.]+,?([\d.]+)?/g)].length;
    expect(ys).toBe(2); // starts at 4 ms, steps down once to 2 ms
  });

  it('switches to a log axis past a factor of 10', () => {
    expect(g.log).toBe(false);
    const wide = plotGeometry([rec(1e-4), rec(5e-3)]);
    expect(wide.log).toBe(true);
    expect(wide.yTicks.map(t => t.label)).toContain('1');
  });

  it('copes with no successes and with one trial', () => {
    expect(plotGeometry([rec(null)]).bestPath).toBe('');
    const one = plotGeometry([rec(1e-3)]);
    expect(one.points[0].x).toBe((DEFAULT_BOX.left + DEFAULT_BOX.width - DEFAULT_BOX.right) / 2);
  });
});

describe('plot SVG', () => {
  it('has one .wb-db-point per trial, failures and noise marked', () => {
    const svg = renderPlot(document, [rec(4e-3), rec(null), rec(2e-3, true)]);
    expect(svg.getAttribute('class')).toBe('wb-db-plot');
    const points = svg.querySelectorAll('.wb-db-point');
    expect(points.length).toBe(3);
    expect(points[1].classList.contains('wb-db-fail')).toBe(true);
    expect(points[2].classList.contains('wb-db-noisy')).toBe(true);
    expect(svg.querySelector('.wb-db-best')).not.toBeNull();
    expect(points[0].querySelector('title')?.textContent).toBe('trial 0: 4 ms');
  });
});
