/**
 * A line diff between two texts (the IR before and after a schedule step).
 *
 * The longest common subsequence of lines, computed on what remains after the
 * common prefix and suffix are set aside (a schedule step usually changes a
 * few lines in the middle). Past `MAX_CELLS` table cells the middle is shown
 * as removed-then-added, so a huge file never freezes the page.
 */

export type DiffKind = 'same' | 'add' | 'del';

export interface IDiffLine {
  kind: DiffKind;
  text: string;
  /** 1-based line number in the text before (same/del) */
  before?: number;
  /** 1-based line number in the text after (same/add) */
  after?: number;
}

export const MAX_CELLS = 4_000_000;

function splitLines(text: string): string[] {
  if (text === '') {
    return [];
  }
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') {
    lines.pop();
  }
  return lines;
}

/** The lines of `after` compared with `before`, in order. */
export function lineDiff(before: string, after: string): IDiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: IDiffLine[] = [];
  for (let i = 0; i < start; i++) {
    out.push({ kind: 'same', text: a[i], before: i + 1, after: i + 1 });
  }
  const n = endA - start;
  const m = endB - start;
  if (n * m > MAX_CELLS) {
    for (let i = start; i < endA; i++) {
      out.push({ kind: 'del', text: a[i], before: i + 1 });
    }
    for (let j = start; j < endB; j++) {
      out.push({ kind: 'add', text: b[j], after: j + 1 });
    }
  } else {
    middle(a, b, start, endA, endB, out);
  }
  for (let i = endA, j = endB; i < a.length; i++, j++) {
    out.push({ kind: 'same', text: a[i], before: i + 1, after: j + 1 });
  }
  return out;
}

function middle(
  a: string[],
  b: string[],
  start: number,
  endA: number,
  endB: number,
  out: IDiffLine[]
): void {
  const n = endA - start;
  const m = endB - start;
  // lcs[i * (m + 1) + j]: LCS length of a[start + i:endA] and b[start + j:endB]
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * width + j] =
        a[start + i] === b[start + j]
          ? lcs[(i + 1) * width + j + 1] + 1
          : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] === b[start + j]) {
      out.push({
        kind: 'same',
        text: a[start + i],
        before: start + i + 1,
        after: start + j + 1
      });
      i++;
      j++;
    } else if (j < m && (i === n || lcs[i * width + j + 1] >= lcs[(i + 1) * width + j])) {
      // prefer removals first when both are optimal, so a changed line reads - then +
      if (i < n && lcs[(i + 1) * width + j] === lcs[i * width + j]) {
        out.push({ kind: 'del', text: a[start + i], before: start + i + 1 });
        i++;
      } else {
        out.push({ kind: 'add', text: b[start + j], after: start + j + 1 });
        j++;
      }
    } else {
      out.push({ kind: 'del', text: a[start + i], before: start + i + 1 });
      i++;
    }
  }
}

/** How many lines were added and removed. */
export function diffStats(lines: IDiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of lines) {
    if (line.kind === 'add') {
      added++;
    } else if (line.kind === 'del') {
      removed++;
    }
  }
  return { added, removed };
}
