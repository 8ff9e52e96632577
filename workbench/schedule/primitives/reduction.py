"""Reductions: decompose_reduction and rfactor.

``decompose_reduction(Y, k)`` moves a reduction block's ``init`` into a block of its
own, ``Y_init``, placed right before loop ``k`` (under the loops above ``k``); the
reduction becomes ``Y_update`` without an init. On ``mm_relu`` split and reordered as
in the MLC course (``split(j, [None, 4])``, ``reorder(j_0, k, j_1)``), before::

    for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j_0 * 4 + j_1)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]

and after ``decompose_reduction(Y, k)``::

    for i, j_0 in T.grid(128, 32):
        for j_1_init in range(4):
            with T.block("Y_init"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1_init)
                Y[vi, vj] = T.float32(0)
        for k, j_1 in T.grid(128, 4):
            with T.block("Y_update"):
                ...  # the same bindings, no init
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]

``rfactor(k_1, factor_axis)`` factorizes a reduction over loop ``k_1``: an rfactor block
``<block>_rf`` accumulates partial results into a new buffer ``<buffer>_rf`` that has
one more dimension (of ``k_1``'s extent, at ``factor_axis``), and the original block
becomes the write-back block summing that dimension. For ``C = A @ B`` with ``k`` split
into ``k_0, k_1`` and ``rfactor(k_1, 0)``::

    C_rf = T.alloc_buffer((4, 128, 128))
    for i, j, k_0, k_1 in T.grid(128, 128, 32, 4):
        with T.block("C_rf"):
            vk_1, vi, vj, vk_0 = T.axis.remap("SSSR", [k_1, i, j, k_0])
            with T.init():
                C_rf[vk_1, vi, vj] = T.float32(0)
            C_rf[vk_1, vi, vj] = C_rf[vk_1, vi, vj] + A[vi, vk_0 * 4 + vk_1] * B[...]
    for i, j, k_1 in T.grid(128, 128, 4):
        with T.block("C"):
            vk_1, vi, vj = T.axis.remap("RSS", [k_1, i, j])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + C_rf[vk_1, vi, vj]

Both follow TVM's ``tir.Schedule`` (names, loop structure, legality rules); both are
pure functions that check first and transform second.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    Add,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    IterVar,
    Mul,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Sub,
    Var,
)
from ...ir.analysis import collect_buffers, iter_blocks, loops_above
from ...ir.functor import expr_vars, iter_exprs, substitute, uses_var
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import (
    check_starts_at_zero,
    child_block_names,
    find_block_path,
    find_loop_path,
    fresh_name,
    is_root,
    replace_child,
    replace_path,
    scope_blocks,
    scope_of,
    used_names,
)
from ._pipeline import stage_pipeline_problem
from .blockize import (
    NotSingleBlockError,
    and_all,
    block_names_in,
    conjuncts,
    single_block_under,
)
from .reducer import UnrecognizedReducerError as UnrecognizedReducerError  # re-exported
from .reducer import match_reducer

# ---------------------------------------------------------------------------
# errors


class NotReductionBlockError(ScheduleError):
    """The block is not a reduction block: no ``init``, bindings that are not
    quasi-affine, output indexed by a reduce iter var, or another block of its scope
    writes the same buffer."""


class LoopNotAncestorError(ScheduleError):
    """The loop is not one of the loops above the block (in the block's scope)."""


class LoopHeightError(ScheduleError):
    """``decompose_reduction``: the loop sits below a loop that a reduce iter var of the
    block depends on, so the init would run inside the reduction."""


class RFactorLoopNotSerialError(ScheduleError):
    """``rfactor``: the loop is parallel, vectorized, unrolled or bound to a thread."""


class RFactorLoopNotReductionError(ScheduleError):
    """``rfactor``: the loop is not bound to a reduce iter var of the block (it feeds a
    spatial iter var, or no iter var at all)."""


class LoopMixesIterKindsError(ScheduleError):
    """``rfactor``: a loop above the block feeds both spatial and reduce iter vars."""


class BlockNotFirstError(ScheduleError):
    """``rfactor``: another block runs before the reduction under the outermost loop."""


class UnboundLoopUnderReductionError(ScheduleError):
    """``rfactor``: a loop (extent > 1) that feeds no iter var sits under a reduction loop."""


class ReductionPredicateError(ScheduleError):
    """``rfactor``: the block's predicate depends on reduction loops, which the write-back
    block no longer has."""


class NotStagePipelineError(ScheduleError):
    """The block's scope is not a stage pipeline (TVM's definition: no write-after-read
    dependency, and every consumer's reads covered by what its producers write)."""


class FactorAxisOutOfRangeError(ScheduleError, ValueError):
    """``rfactor``: ``factor_axis`` is outside ``[-(ndim + 1), ndim]``."""


# ---------------------------------------------------------------------------
# checks shared by both primitives


def _quasi_affine(e: PrimExpr, loop_vars: frozenset = frozenset()) -> bool:
    """Sums of loop variables times constants, floordiv/floormod by positive constants.
    With ``loop_vars`` given, an expression using none of them (a symbolic shape such as
    ``n``) counts as a constant too, as in TVM's affine analysis: fusing loops of extents
    ``4`` and ``n`` binds ``fused // n`` and ``fused % n``."""

    def constant(x: PrimExpr) -> bool:
        if isinstance(x, IntImm):
            return x.value > 0
        return bool(loop_vars) and not (expr_vars(x) & loop_vars)

    if isinstance(e, (Var, IntImm)):
        return True
    if isinstance(e, (Add, Sub)):
        return _quasi_affine(e.a, loop_vars) and _quasi_affine(e.b, loop_vars)
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm) or constant(e.b):
            return _quasi_affine(e.a, loop_vars)
        if isinstance(e.a, IntImm) or constant(e.a):
            return _quasi_affine(e.b, loop_vars)
        return False
    if isinstance(e, (FloorDiv, FloorMod)):
        return constant(e.b) and _quasi_affine(e.a, loop_vars)
    return False


def check_reduction_block(primitive: str, func: PrimFunc, path: list[Stmt]) -> Block:
    """TVM's reduction-block conditions for ``path[-1]``; returns the block."""
    block: Block = path[-1]  # type: ignore[assignment]
    name = block.name

    def refuse(why: str) -> NotReductionBlockError:
        return NotReductionBlockError(
            primitive, f'block "{name}" is not a reduction block: {why}', func, blocks=[name]
        )

    if block.init is None:
        raise refuse("it has no init (T.init())")
    # as in TVM, a block with an init and only spatial iter vars is a reduction block
    # too (its init then runs before each instance); decompose_reduction accepts it
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    loop_vars = frozenset(s.loop_var for s in path if isinstance(s, For))
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        if iv.kind not in ("S", "R"):  # (rolling_buffer makes its rolling axis opaque)
            raise refuse(f"its iter var {iv.var.name} is neither spatial nor a reduction")
        if not _quasi_affine(value, loop_vars):
            raise refuse(f"the binding of {iv.var.name} ({value}) is not quasi-affine")
    for w in block.writes or ():
        for mn, _ in w.region:
            used = sorted(v.name for v in expr_vars(mn) & reduce_vars)
            if used:
                raise refuse(f"the reduce iter var {used[0]} indexes the output {w.buffer.name}")
    mine = {w.buffer for w in block.writes or ()}
    for other in scope_blocks(scope_of(path)):
        if other is not block and any(w.buffer in mine for w in other.writes or ()):
            buf = next(w.buffer.name for w in other.writes or () if w.buffer in mine)
            raise refuse(f'block "{other.name}" writes {buf} too')
    return block


def _block_and_loops(
    primitive: str, func: PrimFunc, block_name: str, loop_var: Var
) -> tuple[list[Stmt], list[For], int]:
    """(block path, loops above it in its scope, index of ``loop_var`` among them)."""
    bpath = find_block_path(func, primitive, block_name)
    find_loop_path(func, primitive, loop_var)  # a loop that is gone is a stale handle
    loops = loops_above(bpath)
    for idx, lp in enumerate(loops):
        if lp.loop_var is loop_var:
            return bpath, loops, idx
    raise LoopNotAncestorError(
        primitive,
        f'loop "{loop_var.name}" is not above block "{block_name}" (in its scope)',
        func,
        loops=[loop_var],
        blocks=[block_name],
    )


def _rebuild(path: list[Stmt], start: int, leaf: Stmt | None) -> Stmt:
    """``path[start]`` with ``path[-1]`` replaced by ``leaf`` (ancestors rebuilt)."""
    node = leaf
    for parent, old in zip(reversed(path[start:-1]), reversed(path[start + 1 :]), strict=True):
        node = replace_child(parent, old, node)
    return node  # type: ignore[return-value]


def _copy_loop(lp: For, var: Var, body: Stmt) -> For:
    return For(var, lp.extent, lp.kind, body, lp.thread_tag, lp.annotations, lp.min)


# ---------------------------------------------------------------------------
# decompose_reduction


def _init_predicate(pred: PrimExpr, discarded: list[For]) -> list[PrimExpr]:
    """The conjuncts of ``pred`` that guard the init block. A loop without a copy in the
    init's nest is a unit loop or a loop of the reduction only; the init runs where it
    is at its first value (a unit loop's only value, the start of the reduction), so a
    conjunct mentioning it is evaluated there and kept unless that makes it true. TVM
    drops every such conjunct, which loses the padding guard ``i_0 * 2 + i_1 < 1`` once
    ``split(..., preserve_unit_iters=False)`` took the unit ``i_0`` out of the binding."""
    at_start = {lp.loop_var: IntImm(lp.min, lp.loop_var.dtype) for lp in discarded}
    kept = []
    for c in conjuncts(pred):
        if expr_vars(c) & at_start.keys():
            c = simplify(substitute(c, at_start))
        kept.extend(conjuncts(c))
    return kept


def decompose_reduction(
    func: PrimFunc, block_name: str, loop_var: Var
) -> tuple[PrimFunc, str, str]:
    """Split a reduction block's init into ``<block>_init`` placed before ``loop_var``.

    Returns ``(new_func, init_block_name, update_block_name)``. The init block gets a
    copy (named ``<loop>_init``) of every loop at or below ``loop_var`` that its spatial
    bindings use; the original block is renamed ``<block>_update`` and loses its init.
    The init keeps the block's predicate, a loop without a copy fixed at its first value.
    Refuses a block that is not a reduction block, a loop that is not above the block,
    and a loop below a loop that a reduce iter var depends on.
    """
    p = "decompose_reduction"
    bpath, loops, idx = _block_and_loops(p, func, block_name, loop_var)
    block = check_reduction_block(p, func, bpath)
    higher = {lp.loop_var: lp for lp in loops[:idx]}
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        if iv.kind != "R":
            continue
        hit = next((lp for v, lp in higher.items() if uses_var(value, v)), None)
        if hit is not None:
            raise LoopHeightError(
                p,
                f'loop "{loop_var.name}" is below loop "{hit.loop_var.name}", which the '
                f'reduce iter var {iv.var.name} of block "{block_name}" depends on; the '
                "init must go above every loop of the reduction",
                func,
                loops=[loop_var, hit.loop_var],
                blocks=[block_name],
            )
    # the init runs where every reduce iter var is 0: a reduction loop that does not
    # start at 0 (a loop_partition piece) never gets there, an init block would reset it
    check_starts_at_zero(func, p, [
        lp for lp in loops[idx:]
        if any(iv.kind == "R" and uses_var(v, lp.loop_var)
               for iv, v in zip(block.iter_vars, block.iter_values, strict=True))])
    for lp in loops[idx:]:
        unit = isinstance(lp.extent, int) and lp.extent == 1  # runs once: harmless
        if not unit and not any(uses_var(v, lp.loop_var) for v in block.iter_values):
            raise LoopHeightError(
                p,
                f'loop "{lp.loop_var.name}" at or below loop "{loop_var.name}" drives none of '
                f'the iter vars of block "{block_name}" (the block is recomputed for each of '
                "its iterations); an init placed above it would run once for several "
                "recomputations",
                func,
                loops=[loop_var, lp.loop_var],
                blocks=[block_name],
            )
    taken = used_names(func)
    # init block iter vars: copies of the spatial ones, same names and bindings
    init_ivs, init_values, var_map = [], [], {}
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        if iv.kind == "S":
            new = Var(iv.var.name, iv.var.dtype)
            var_map[iv.var] = new
            init_ivs.append(IterVar(new, iv.extent, "S"))
            init_values.append(value)
    # loops at or below `loop_var` that the init bindings use get a copy
    chosen, discarded = [], set()
    for lp in reversed(loops[idx:]):
        if any(uses_var(v, lp.loop_var) for v in init_values):
            chosen.append(lp)
        else:
            discarded.add(lp.loop_var)
    loop_map = {
        lp.loop_var: Var(fresh_name(f"{lp.loop_var.name}_init", taken), lp.loop_var.dtype)
        for lp in chosen
    }
    blocks = block_names_in(func)
    kept = _init_predicate(block.predicate, [lp for lp in loops[idx:] if lp.loop_var in discarded])
    init_block = Block(
        fresh_name(f"{block_name}_init", blocks),
        tuple(init_ivs),
        tuple(substitute(v, loop_map) for v in init_values),
        substitute(block.init, var_map),
        None,
        substitute(and_all(kept), loop_map),
        (),
        block.annotations,
    )
    init_nest: Stmt = init_block
    for lp in chosen:  # innermost first
        init_nest = _copy_loop(lp, loop_map[lp.loop_var], init_nest)
    # the update block: no init; it now reads what it writes (TVM: writes first)
    read_bufs = {r.buffer for r in block.reads or ()}
    reads = tuple(w for w in block.writes or () if w.buffer not in read_bufs) + tuple(
        block.reads or ()
    )
    update = replace(block, name=fresh_name(f"{block_name}_update", blocks), init=None, reads=reads)
    li = bpath.index(loops[idx])
    new_loop = _rebuild(bpath, li, update)
    new_func = replace_path(func, bpath[: li + 1], SeqStmt((init_nest, new_loop)))
    return new_func, init_block.name, update.name


# ---------------------------------------------------------------------------
# rfactor


def _rfactor_checks(func: PrimFunc, loop_var: Var):
    p = "rfactor"
    lpath, bpath = single_block_under(p, func, loop_var)
    loop: For = lpath[-1]  # type: ignore[assignment]
    name, block_name = loop_var.name, bpath[-1].name  # type: ignore[attr-defined]
    scope = scope_of(bpath)
    problem = stage_pipeline_problem(func, scope, p)
    if problem is not None:
        raise NotStagePipelineError(
            p,
            f'the scope "{scope.name}" of block "{block_name}" (loop "{name}") is not a stage '
            f"pipeline: {problem}",
            func,
            loops=[loop_var],
            blocks=[block_name],
        )
    block = check_reduction_block(p, func, bpath)
    if loop.kind != "serial":
        tag = f" to {loop.thread_tag}" if loop.thread_tag else ""
        raise RFactorLoopNotSerialError(
            p,
            f'loop "{name}" is {loop.kind}{tag}; rfactor needs a serial loop',
            func,
            loops=[loop_var],
        )
    loops = loops_above(bpath)
    spatial_vars: set[Var] = set()
    reduce_vars: set[Var] = set()
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        (spatial_vars if iv.kind == "S" else reduce_vars).update(expr_vars(value))
    first = next(b for b in iter_blocks(loops[0]) if b.name in child_block_names(loops[0]))
    if first is not block:
        raise BlockNotFirstError(
            p,
            f'block "{first.name}" runs before block "{block_name}" under the outermost loop '
            f'"{loops[0].loop_var.name}"; rfactor puts its new block before that loop',
            func,
            loops=[loops[0].loop_var],
            blocks=[block_name, first.name],
        )
    met_reduction = False
    for lp in loops:
        v, lname = lp.loop_var, lp.loop_var.name
        dp, rd = v in spatial_vars, v in reduce_vars
        if dp and rd:
            raise LoopMixesIterKindsError(
                p,
                f'loop "{lname}" feeds both spatial and reduce iter vars of block "{block_name}"',
                func,
                loops=[v],
                blocks=[block_name],
            )
        if v is loop_var and not rd and (dp or lp.extent != 1):
            why = "a spatial iter var" if dp else "no iter var"
            raise RFactorLoopNotReductionError(
                p,
                f'loop "{lname}" feeds {why} of block "{block_name}"; rfactor needs a loop '
                "bound to a reduce iter var",
                func,
                loops=[v],
                blocks=[block_name],
            )
        if rd and not met_reduction:
            met_reduction = True
            if len(child_block_names(lp)) != 1:
                raise NotSingleBlockError(
                    p,
                    f'the outermost reduction loop "{lname}" of block "{block_name}" has other '
                    "blocks under it",
                    func,
                    loops=[v],
                    blocks=[block_name],
                )
        elif not dp and not rd and met_reduction and lp.extent != 1:
            raise UnboundLoopUnderReductionError(
                p,
                f'loop "{lname}" (extent {lp.extent}) feeds no iter var of block '
                f'"{block_name}" but sits under a reduction loop',
                func,
                loops=[v],
                blocks=[block_name],
            )
    reduce_loops = {lp.loop_var for lp in loops if lp.loop_var in reduce_vars}
    _check_predicate(func, block, loops, loop_var, reduce_loops)
    return loop, bpath, block, loops, reduce_loops, match_reducer(func, block)


def _check_predicate(
    func: PrimFunc, block: Block, loops: list[For], loop_var: Var, reduce_loops: set[Var]
) -> None:
    """Every slot of the rfactor buffer must be initialized: where the other reduction
    loops are 0 (the rfactor block's init point), each conjunct of the predicate that
    involves reduction loops must hold for every value of ``loop_var``. Those conjuncts
    then leave the write-back block, which reads every slot."""
    bounds = {lp.loop_var: (lp.min, lp.end - 1) for lp in loops}
    zero: dict[Var, PrimExpr] = {v: IntImm(0, v.dtype) for v in reduce_loops if v is not loop_var}
    # the init point has every reduce iter var at 0; the other reduction loops at 0 must
    # give that for the iter vars that rfactor keeps (those not over `loop_var`)
    init_at_zero = all(
        _is_const(simplify(substitute(value, zero), bounds), 0)
        for iv, value in zip(block.iter_vars, block.iter_values, strict=True)
        if iv.kind == "R" and not uses_var(value, loop_var)
    )
    for c in conjuncts(block.predicate):
        used = sorted(x.name for x in expr_vars(c) & reduce_loops)
        if not used:
            continue
        if not (init_at_zero and _is_const(simplify(substitute(c, zero), bounds), 1)):
            raise ReductionPredicateError(
                "rfactor",
                f'block "{block.name}" has the predicate {c} over the reduction loop '
                f'"{used[0]}", which does not hold at the init of every slot of the rfactor '
                f'loop "{loop_var.name}"',
                func,
                loops=[loop_var],
                blocks=[block.name],
            )


def _is_const(e: PrimExpr, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def rfactor(func: PrimFunc, loop_var: Var, factor_axis: int) -> tuple[PrimFunc, str]:
    """Factorize the reduction under ``loop_var``; returns ``(new_func, rf_block_name)``.

    The rfactor block ``<block>_rf`` (under copies of all the block's loops) writes the
    new buffer ``<buffer>_rf`` (allocated in the block's scope), whose extra dimension of
    ``loop_var``'s extent sits at ``factor_axis`` (negative counts from the end, as in
    numpy: ``-1`` appends). The original block keeps its name and becomes the
    write-back block, under its loops minus the reduction loops other than ``loop_var``.

    As in TVM, the block's scope must be a stage pipeline (:mod:`._pipeline`), and an
    update through a let-binding (``v = C[i] + x; C[i] = v``) is read as ``C[i] = C[i] +
    x``. Two-buffer reductions (argmax / argmin over an index and a value, see
    :mod:`.reducer`) get one rfactor buffer per output buffer, and both blocks update
    them through let-bindings ``v_<buffer>`` as TVM writes them.

    Predicates, where we deliberately differ from TVM 0.27: the write-back block keeps
    the conjuncts over spatial loops (TVM drops them and writes out of bounds), and a
    conjunct over reduction loops is accepted only if it holds at the rfactor block's
    init point for every slot (TVM accepts ``split(k, [5, 4])`` of 16 then
    ``rfactor(k_0)``, whose slot ``k_0 = 4`` is never initialized).
    """
    p = "rfactor"
    loop, bpath, block, loops, reduce_loops, red = _rfactor_checks(func, loop_var)
    check_starts_at_zero(func, p, loops)
    store = red.stores[0]
    buf = store.buffer
    ndim = len(buf.shape)
    if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
        raise FactorAxisOutOfRangeError(
            p, f"factor_axis must be an integer, got {factor_axis!r}", func, loops=[loop_var]
        )
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise FactorAxisOutOfRangeError(
            p,
            f"factor_axis {factor_axis} is out of range for buffer {buf.name} of block "
            f'"{block.name}" ({ndim} dimension(s)): it must be in [{-(ndim + 1)}, {ndim}] '
            f'(loop "{loop_var.name}")',
            func,
            loops=[loop_var],
            blocks=[block.name],
        )
    axis = factor_axis + ndim + 1 if factor_axis < 0 else factor_axis
    buffers = {b.name for b in collect_buffers(func)}
    rf_bufs = []
    for st in red.stores:
        b = st.buffer
        rf_shape = b.shape[:axis] + (loop.extent,) + b.shape[axis:]
        rf_bufs.append(b.with_(name=fresh_name(f"{b.name}_rf", buffers), shape=rf_shape, align=()))
        buffers.add(rf_bufs[-1].name)

    # ---- the rfactor block, under copies of every loop
    loop_map = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    rf_name = f"v{loop_var.name}"
    add_var = Var(rf_name, loop_var.dtype)  # new vars take their loop's index type
    ivs, values = [IterVar(add_var, loop.extent, "S")], [loop_map[loop_var]]
    names = {rf_name}
    loop_to_iter: dict[Var, PrimExpr] = {loop_var: add_var}
    var_map: dict[Var, PrimExpr] = {}
    by_var = {lp.loop_var: lp for lp in loops}
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        if iv.kind == "S" or not uses_var(value, loop_var):
            ivs.append(iv)
            values.append(substitute(value, loop_map))
            names.add(iv.var.name)
            continue
        for x in _vars_in_order(value):
            if x in loop_to_iter or x not in by_var:
                continue
            new = Var(fresh_name(f"v{x.name}", names), x.dtype)
            loop_to_iter[x] = new
            ivs.append(IterVar(new, by_var[x].extent, "R"))
            values.append(loop_map[x])
        var_map[iv.var] = substitute(value, loop_to_iter)
    rf_idx = list(store.indices)
    rf_idx.insert(axis, add_var)
    rf_stores = [BufferStore(b, b_id, tuple(rf_idx)) for b, b_id in zip(
        rf_bufs, red.identities, strict=True)]  # the init stores; their places for the update
    rf_rhs = [substitute(r, var_map) for r in red.rhs]
    has_reduce = any(iv.kind == "R" for iv in ivs)
    if has_reduce:
        rf_lhs = [BufferLoad(s.buffer, s.indices) for s in rf_stores]
        rf_body = red.update(rf_stores, rf_lhs, rf_rhs)
    else:
        rf_body = _seq([BufferStore(s.buffer, r, s.indices) for s, r in zip(
            rf_stores, rf_rhs, strict=True)])
    rf_block = Block(
        fresh_name(f"{block.name}_rf", block_names_in(func)),
        tuple(ivs),
        tuple(values),
        rf_body,
        _seq(rf_stores) if has_reduce else None,
        substitute(block.predicate, loop_map),
        (),
        block.annotations,
    )
    rf_nest: Stmt = rf_block
    for lp in reversed(loops):
        rf_nest = _copy_loop(lp, loop_map[lp.loop_var], rf_nest)

    # ---- the write-back block: original name, loops minus the other reduction loops
    wb_var = Var(rf_name, loop_var.dtype)
    wb_ivs, wb_values = [IterVar(wb_var, loop.extent, "R")], [loop_var]
    spatial_map: dict[Var, PrimExpr] = {add_var: wb_var}
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        if iv.kind == "S":
            new = Var(iv.var.name, iv.var.dtype)
            spatial_map[iv.var] = new
            wb_ivs.append(IterVar(new, iv.extent, "S"))
            wb_values.append(value)
    out_idx = tuple(substitute(i, spatial_map) for i in store.indices)
    wb_rf_idx = tuple(substitute(i, spatial_map) for i in rf_idx)
    out_stores = [BufferStore(s.buffer, v, out_idx) for s, v in zip(
        red.stores, red.identities, strict=True)]
    wb_block = Block(
        block.name,
        tuple(wb_ivs),
        tuple(wb_values),
        red.update(
            out_stores,
            [BufferLoad(s.buffer, out_idx) for s in out_stores],
            [BufferLoad(b, wb_rf_idx) for b in rf_bufs],
        ),
        _seq(out_stores),
        and_all([c for c in conjuncts(block.predicate) if not expr_vars(c) & reduce_loops]),
        (),
        block.annotations,
    )
    start = bpath.index(loops[0])
    node: Stmt = wb_block
    for parent, old in zip(reversed(bpath[start:-1]), reversed(bpath[start + 1 :]), strict=True):
        if isinstance(parent, For) and parent.loop_var in reduce_loops and parent is not loop:
            continue  # this reduction loop disappears around the write-back block
        node = replace_child(parent, old, node)
    new_func = replace_path(func, bpath[: start + 1], SeqStmt((rf_nest, node)))
    for b in rf_bufs:
        new_func = _allocate(new_func, scope_of(bpath).name, b)
    return new_func, rf_block.name


def _seq(stmts: list[Stmt]) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))


def _vars_in_order(e: PrimExpr) -> list[Var]:
    out: list[Var] = []
    for x in iter_exprs(e):
        if isinstance(x, Var) and x not in out:
            out.append(x)
    return out


def _allocate(func: PrimFunc, scope_name: str, buf: Buffer) -> PrimFunc:
    """``func`` with ``buf`` allocated in block ``scope_name``."""
    path = find_block_path(func, "rfactor", scope_name)
    scope: Block = path[-1]  # type: ignore[assignment]
    allocs = scope.alloc_buffers + (buf,)
    if is_root(scope):
        new = Block(
            scope.name, (), (), scope.body, None, scope.predicate, allocs, scope.annotations, (), ()
        )
    else:
        new = replace(scope, alloc_buffers=allocs, reads=None, writes=None)
    return replace_path(func, path, new)
