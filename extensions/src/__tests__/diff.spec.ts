import { diffStats, lineDiff, MAX_CELLS } from '../diff';

describe('lineDiff', () => {
  it('marks added and removed lines and keeps the rest', () => {
    const before = 'a\nb\nc\nd\n';
    const after = 'a\nB\nc\nd\ne\n';
    const lines = lineDiff(before, after);
    expect(lines.map(l => `${l.kind}:${l.text}`)).toEqual([
      'same:a',
      'del:b',
      'add:B',
      'same:c',
      'same:d',
      'add:e'
    ]);
    expect(diffStats(lines)).toEqual({ added: 2, removed: 1 });
  });

  it('numbers lines on both sides', () => {
    const lines = lineDiff('x\ny\n', 'w\nx\ny\n');
    expect(lines[0]).toEqual({ kind: 'add', text: 'w', after: 1 });
    expect(lines[1]).toEqual({ kind: 'same', text: 'x', before: 1, after: 2 });
  });

  it('reports no change for equal texts', () => {
    const lines = lineDiff('p\nq', 'p\nq\n');
    expect(lines.every(l => l.kind === 'same')).toBe(true);
    expect(diffStats(lines)).toEqual({ added: 0, removed: 0 });
  });

  it('finds the longest common subsequence, not just prefix and suffix', () => {
    const before = ['for i:', '  for j:', '    for k:', '      body', 'end'].join('\n');
    const after = ['for i:', '  for j0:', '    for k:', '      for j1:', '        body', 'end'].join('\n');
    const kinds = lineDiff(before, after).map(l => l.kind[0]).join('');
    // for i | -j +j0 | for k | -body +j1 +body | end
    expect(kinds).toBe('sdasdaas');
    expect(diffStats(lineDiff(before, after))).toEqual({ added: 3, removed: 2 });
  });

  it('handles empty texts', () => {
    expect(lineDiff('', '')).toEqual([]);
    expect(lineDiff('', 'a\nb').map(l => l.kind)).toEqual(['add', 'add']);
    expect(lineDiff('a', '').map(l => l.kind)).toEqual(['del']);
  });

  it('falls back to remove-then-add past the size bound', () => {
    const n = Math.ceil(Math.sqrt(MAX_CELLS)) + 2;
    const before = Array.from({ length: n }, (_, i) => `old ${i}`).join('\n');
    const after = Array.from({ length: n }, (_, i) => `new ${i}`).join('\n');
    const lines = lineDiff(before, after);
    expect(lines.length).toBe(2 * n);
    expect(lines[0].kind).toBe('del');
    expect(lines[n].kind).toBe('add');
  });
});
