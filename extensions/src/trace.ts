/**
 * Instructions of a trace in TVM's JSON shape `[[insts], [decisions]]`, where
 * one instruction is `[kind, inputs, attrs, outputs]`, printed as the
 * `sch.<method>(...)` calls TVM prints for `apply_trace`.
 *
 * Only the printing is done here (a viewer shows the steps); nothing is
 * replayed. Kinds this table does not know print generically.
 */

interface IKindInfo {
  method: string;
  /** input names; '*name' takes every remaining input as one list */
  inputs?: string[];
  attrs?: string[];
  /** print order (defaults to inputs then attrs) */
  order?: string[];
  /** printed without keyword */
  positional?: string[];
  bools?: string[];
  omitEmpty?: string[];
}

const KINDS: Record<string, IKindInfo> = {
  GetSBlock: { method: 'get_sblock', attrs: ['name', 'func_name'] },
  GetBlock: { method: 'get_block', attrs: ['name', 'func_name'] },
  GetLoops: { method: 'get_loops', inputs: ['block'] },
  GetChildSBlocks: { method: 'get_child_sblocks', inputs: ['block_or_loop'] },
  GetChildBlocks: { method: 'get_child_blocks', inputs: ['block_or_loop'] },
  GetProducers: { method: 'get_producers', inputs: ['block'] },
  GetConsumers: { method: 'get_consumers', inputs: ['block'] },
  GetOutputBlocks: { method: 'get_output_blocks', inputs: ['block'] },
  Split: {
    method: 'split',
    inputs: ['loop', '*factors'],
    attrs: ['preserve_unit_iters', 'disable_predication'],
    bools: ['preserve_unit_iters', 'disable_predication']
  },
  Fuse: {
    method: 'fuse',
    inputs: ['*loops'],
    attrs: ['preserve_unit_iters'],
    positional: ['loops'],
    bools: ['preserve_unit_iters']
  },
  Reorder: { method: 'reorder', inputs: ['*ordered_loops'], positional: ['ordered_loops'] },
  Merge: { method: 'merge', inputs: ['*loops'], positional: ['loops'] },
  Parallel: { method: 'parallel', inputs: ['loop'] },
  Vectorize: { method: 'vectorize', inputs: ['loop'] },
  Unroll: { method: 'unroll', inputs: ['loop'] },
  Bind: { method: 'bind', inputs: ['loop'], attrs: ['thread_axis'] },
  Annotate: {
    method: 'annotate',
    inputs: ['block_or_loop', 'ann_val'],
    attrs: ['ann_key'],
    order: ['block_or_loop', 'ann_key', 'ann_val']
  },
  Unannotate: { method: 'unannotate', inputs: ['block_or_loop'], attrs: ['ann_key'] },
  ComputeAt: {
    method: 'compute_at',
    inputs: ['block', 'loop'],
    attrs: ['preserve_unit_loops', 'index'],
    bools: ['preserve_unit_loops']
  },
  ReverseComputeAt: {
    method: 'reverse_compute_at',
    inputs: ['block', 'loop'],
    attrs: ['preserve_unit_loops', 'index'],
    bools: ['preserve_unit_loops']
  },
  ComputeInline: { method: 'compute_inline', inputs: ['block'] },
  ReverseComputeInline: { method: 'reverse_compute_inline', inputs: ['block'] },
  CacheRead: {
    method: 'cache_read',
    inputs: ['block', 'consumer_blocks'],
    attrs: ['read_buffer_index', 'storage_scope'],
    order: ['block', 'read_buffer_index', 'storage_scope', 'consumer_blocks'],
    omitEmpty: ['consumer_blocks']
  },
  CacheWrite: {
    method: 'cache_write',
    inputs: ['block', 'consumer_blocks'],
    attrs: ['write_buffer_index', 'storage_scope'],
    order: ['block', 'write_buffer_index', 'storage_scope', 'consumer_blocks'],
    omitEmpty: ['consumer_blocks']
  },
  SetScope: {
    method: 'set_scope',
    inputs: ['block'],
    attrs: ['buffer_index', 'storage_scope']
  },
  StorageAlign: {
    method: 'storage_align',
    inputs: ['block'],
    attrs: ['buffer_index', 'axis', 'factor', 'offset']
  },
  DecomposeReduction: { method: 'decompose_reduction', inputs: ['block', 'loop'] },
  RFactor: { method: 'rfactor', inputs: ['loop'], attrs: ['factor_axis'] },
  Blockize: {
    method: 'blockize',
    inputs: ['target'],
    attrs: ['preserve_unit_iters'],
    bools: ['preserve_unit_iters']
  },
  AddUnitLoop: { method: 'add_unit_loop', inputs: ['block_or_loop'] },
  SamplePerfectTile: {
    method: 'sample_perfect_tile',
    inputs: ['loop'],
    attrs: ['n', 'max_innermost_factor']
  },
  SampleCategorical: { method: 'sample_categorical', attrs: ['candidates', 'probs'] },
  SampleComputeLocation: { method: 'sample_compute_location', inputs: ['block'] }
};

/** One instruction of a trace, as read from its JSON. */
export interface IInstruction {
  kind: string;
  inputs: unknown[];
  attrs: unknown[];
  outputs: string[];
  decision?: unknown;
}

/** A parsed trace: its instructions (decisions attached to their instruction). */
export interface ITrace {
  instructions: IInstruction[];
}

/** Thrown for JSON that is not a trace; the message says what is wrong. */
export class TraceFormatError extends Error {}

/**
 * Parse TVM's trace JSON `[[insts], [decisions]]` (the decisions list may be
 * missing). Throws TraceFormatError naming the first problem.
 */
export function parseTrace(value: unknown): ITrace {
  if (!Array.isArray(value) || value.length < 1 || value.length > 2) {
    throw new TraceFormatError('a trace is [[instructions], [decisions]]');
  }
  const [insts, decisions = []] = value as unknown[][];
  if (!Array.isArray(insts) || !Array.isArray(decisions)) {
    throw new TraceFormatError('a trace is [[instructions], [decisions]]');
  }
  const instructions: IInstruction[] = insts.map((inst, n) => {
    if (
      !Array.isArray(inst) ||
      inst.length !== 4 ||
      typeof inst[0] !== 'string' ||
      !Array.isArray(inst[1]) ||
      !Array.isArray(inst[2]) ||
      !Array.isArray(inst[3])
    ) {
      throw new TraceFormatError(
        `instruction ${n} is not [kind, inputs, attributes, outputs]`
      );
    }
    return {
      kind: inst[0] as string,
      inputs: inst[1] as unknown[],
      attrs: inst[2] as unknown[],
      outputs: (inst[3] as unknown[]).map(String)
    };
  });
  decisions.forEach((entry, n) => {
    if (
      !Array.isArray(entry) ||
      entry.length !== 2 ||
      typeof entry[0] !== 'number' ||
      !instructions[entry[0]]
    ) {
      throw new TraceFormatError(`decision ${n} is not [instruction index, value]`);
    }
    instructions[entry[0]].decision = entry[1];
  });
  return { instructions };
}

function pyValue(value: unknown, bool = false): string {
  if (value === null || value === undefined || value === 'None') {
    return 'None';
  }
  if (bool && (value === 0 || value === 1)) {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'string') {
    // handles (b0, l1, v2) print bare; anything else is a string literal
    return /^[blv_]\d*$/.test(value) || value === '_' ? value : JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return '[' + value.map(v => pyValue(v)).join(', ') + ']';
  }
  return JSON.stringify(value);
}

function snake(kind: string): string {
  return kind.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** The instruction as a Python call, e.g. `l1, l2 = sch.split(loop=l0, factors=[None, 4], ...)`. */
export function formatInstruction(inst: IInstruction): string {
  const info = KINDS[inst.kind];
  const args: string[] = [];
  if (info) {
    const values: Record<string, unknown> = {};
    const inputs = info.inputs ?? [];
    inputs.forEach((name, n) => {
      if (name.startsWith('*')) {
        values[name.slice(1)] = inst.inputs.slice(n);
      } else {
        values[name] = inst.inputs[n];
      }
    });
    (info.attrs ?? []).forEach((name, n) => {
      values[name] = inst.attrs[n];
    });
    const order = info.order ?? [...inputs.map(n => n.replace('*', '')), ...(info.attrs ?? [])];
    for (const name of order) {
      const value = values[name];
      if (value === undefined) {
        continue;
      }
      if (info.omitEmpty?.includes(name) && Array.isArray(value) && value.length === 0) {
        continue;
      }
      const text = pyValue(value, info.bools?.includes(name));
      if (info.positional?.includes(name) && Array.isArray(value)) {
        args.push(...value.map(v => pyValue(v)));
      } else {
        args.push(`${name}=${text}`);
      }
    }
  } else {
    args.push(...inst.inputs.map(v => pyValue(v)), ...inst.attrs.map(v => pyValue(v)));
  }
  if (inst.decision !== undefined) {
    args.push(`decision=${pyValue(inst.decision)}`);
  }
  const call = `sch.${info ? info.method : snake(inst.kind)}(${args.join(', ')})`;
  return inst.outputs.length ? `${inst.outputs.join(', ')} = ${call}` : call;
}
