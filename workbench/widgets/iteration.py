"""A picture of the loop nest: which point of a block's iteration space the schedule
visits first, second, third...

:func:`visit_order` is the model: it enumerates the loops around a block in execution
order, evaluates the block's iter-var bindings (and ``T.where`` predicates) with numpy
over the whole nest at once, and returns an :class:`IterationPicture` with, for every
point of two chosen iteration axes, the rank of its first visit and the tile boundaries
that splits left on each axis. :func:`plot_iteration_space` draws it with matplotlib;
:class:`workbench.widgets.iteration_view.IterationView` puts it in a notebook widget.

>>> import workbench as wb
>>> sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> j0, j1 = sch.split(j, factors=[None, 4])
>>> sch.reorder(j0, i, j1)
>>> pic = visit_order(sch, "Y")
>>> pic.title
'Y: j_0, i, j_1, k'
>>> pic.order[:2]            # rows vi, columns vj: the left tile is swept first
array([[ 0,  1,  2,  3, 32, 33, 34, 35],
       [ 4,  5,  6,  7, 36, 37, 38, 39]])
>>> [(t.loop, t.size, t.boundaries) for t in pic.x_tiles]
[('j_0', 4, (4,))]

This module does not import ipywidgets, and matplotlib only when drawing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ir import expr as E
from ..ir.analysis import block_names, block_path
from ..ir.functor import expr_vars
from ..ir.stmt import Block, For, IfThenElse, IRModule, PrimFunc
from ..search.result import figure_svg

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "IterationModel",
    "IterationPicture",
    "LoopInfo",
    "TileLevel",
    "plot_iteration_space",
    "visit_order",
]

#: Points of the loop nest evaluated in one numpy pass (bounds memory use).
_CHUNK_POINTS = 1 << 22
#: Refuse loop nests whose relevant part has more points than this.
_MAX_POINTS = 1 << 27
#: Grids up to this many cells get their visit numbers written in by default.
_ANNOTATE_CELLS = 256


# ---------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class LoopInfo:
    """One loop around the block, outermost first."""

    name: str
    extent: int
    kind: str = "serial"
    thread_tag: str | None = None

    @property
    def label(self) -> str:
        """``"j_0"`` for a serial loop, ``"j_0 (parallel)"`` or ``"i_0 (blockIdx.x)"``
        otherwise."""
        if self.kind == "serial":
            return self.name
        return f"{self.name} ({self.thread_tag or self.kind})"


@dataclass(frozen=True)
class TileLevel:
    """Tiles that a split left on one axis: the loop ``loop`` steps the axis by ``size``,
    so a new tile starts at each position of ``boundaries`` (inside ``(0, extent)``)."""

    loop: str
    size: int
    boundaries: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class IterationPicture:
    """The visit order of one block over two of its iteration axes.

    Arrays have shape ``(y_extent, x_extent)`` (rows are ``y``, columns ``x``); a block
    drawn along one axis has ``y is None`` and a single row.

    - ``first_visit``: the iteration number (0-based, counting every iteration of the
      loops around the block in execution order) at which the point is first visited,
      or -1 if it never is.
    - ``order``: the same ranks made dense, ``0 .. num_points - 1`` (-1: never visited).
    - ``visits``: how many times the point is visited (other axes, such as a reduction
      axis not drawn, are projected onto it).
    - ``x_tiles`` / ``y_tiles``: tile levels from splits, outermost (largest) first.
    """

    block: str
    x: str | None
    y: str | None
    x_extent: int
    y_extent: int
    iter_vars: tuple[str, ...]
    loops: tuple[LoopInfo, ...]
    first_visit: np.ndarray
    order: np.ndarray
    visits: np.ndarray
    x_tiles: tuple[TileLevel, ...]
    y_tiles: tuple[TileLevel, ...]
    predicated: bool

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)`` of the picture."""
        return (self.y_extent, self.x_extent)

    @property
    def covered(self) -> np.ndarray:
        """Boolean mask of the points the schedule visits at least once."""
        return self.order >= 0

    @property
    def num_points(self) -> int:
        """How many points of the picture are visited."""
        return int(np.count_nonzero(self.order >= 0))

    @property
    def total_iterations(self) -> int:
        """Iterations of the whole loop nest around the block."""
        return math.prod(lp.extent for lp in self.loops)

    @property
    def loop_order(self) -> str:
        """The loops around the block, outermost first: ``"i, j_0, k, j_1"``."""
        return ", ".join(lp.label for lp in self.loops) if self.loops else "(no loops)"

    @property
    def title(self) -> str:
        """``"<block>: <loop order>"``, e.g. ``"Y: i, j_0, k, j_1"``."""
        return f"{self.block}: {self.loop_order}"

    def points_in_order(self) -> np.ndarray:
        """``(num_points, 2)`` array of ``(y, x)`` coordinates in visit order.

        >>> import workbench as wb
        >>> visit_order(wb.workloads.mm_relu(2, 2, 2), "Y").points_in_order().tolist()
        [[0, 0], [0, 1], [1, 0], [1, 1]]
        """
        ys, xs = np.nonzero(self.order >= 0)
        idx = np.argsort(self.order[ys, xs], kind="stable")
        return np.stack([ys[idx], xs[idx]], axis=1)


def visit_order(func_or_sch: Any, block: str, x: str | None = None, y: str | None = None
                ) -> IterationPicture:
    """The order in which the schedule visits a block's ``(y, x)`` iteration points.

    ``func_or_sch`` is a :class:`~workbench.ir.PrimFunc`, a one-function
    :class:`~workbench.ir.IRModule` or a :class:`~workbench.Schedule` (its current
    ``sch.func``). ``x`` and ``y`` name two of the block's iteration variables
    (``"vj"``, ``"vi"``); by default ``y`` (rows) is the block's first spatial variable
    and ``x`` (columns) its second, so the picture is laid out like the output buffer.
    Reduction variables fill in when the block has fewer than two spatial ones; a block
    with a single iteration variable gets a one-row picture.

    All loops above the block (from the function's root, through enclosing blocks)
    count, in nesting order; loops inside the block do not. Parallel, vectorized,
    unrolled and thread-bound loops are counted in their sequential order (as if run by
    one thread), and their kind is shown in :attr:`IterationPicture.loop_order`.
    Predicates (``T.where``, enclosing ``if``) exclude points. Loops that neither
    binding nor predicate uses are projected away without being enumerated, so a
    128x128x128 matmul costs no more than its 128x128 picture.

    Raises ``ValueError`` naming the block or axis when they do not exist, and naming
    the expression when a binding uses something other than affine integer arithmetic
    (``+ - * // % min max``, comparisons, ``and``/``or``/``not``, ``select``).

    >>> import workbench as wb
    >>> pic = visit_order(wb.workloads.mm_relu(4, 4, 4), "Y")
    >>> pic.y, pic.x, pic.title
    ('vi', 'vj', 'Y: i, j, k')
    >>> pic.first_visit[0]          # k is innermost: each (vi, vj) is 4 iterations apart
    array([ 0,  4,  8, 12])
    >>> int(pic.visits[0, 0])       # ... and is visited 4 times
    4
    """
    func = _as_func(func_or_sch)
    if not isinstance(block, str):
        raise TypeError(f"block must be a block name (str), got {type(block).__name__}")
    path = block_path(func, block)
    if path is None or path[-1] is func.body:
        names = ", ".join(block_names(func)) or "none"
        raise ValueError(f'no block "{block}" in {func.name}; its blocks: {names}')
    target = path[-1]
    assert isinstance(target, Block)
    x, y = _choose_axes(target, x, y)
    return _picture(path, target, x, y)


def _as_func(obj: Any) -> PrimFunc:
    if isinstance(obj, PrimFunc):
        return obj
    if isinstance(obj, IRModule):
        if len(obj) != 1:
            raise ValueError(
                f"the module has {len(obj)} functions {obj.names}; pass one of them "
                "(mod[name])"
            )
        return obj[obj.names[0]]
    func = getattr(obj, "func", None)  # a Schedule
    if isinstance(func, PrimFunc):
        return func
    raise TypeError(f"expected a Schedule, PrimFunc or IRModule, got {type(obj).__name__}")


def _choose_axes(block: Block, x: str | None, y: str | None) -> tuple[str | None, str | None]:
    names = [iv.var.name for iv in block.iter_vars]
    for axis, name in (("x", x), ("y", y)):
        if name is not None and name not in names:
            have = ", ".join(names) or "none"
            raise ValueError(
                f'block "{block.name}" has no iteration variable "{name}" (asked for {axis}); '
                f"it has: {have}"
            )
    if x is not None and x == y:
        raise ValueError(f'x and y are both "{x}"; choose two different iteration variables '
                         f'of block "{block.name}"')
    preferred = [iv.var.name for iv in block.iter_vars if iv.kind == "S"]
    preferred += [iv.var.name for iv in block.iter_vars if iv.kind != "S"]
    if x is None and y is None:
        if len(preferred) >= 2:
            return preferred[1], preferred[0]
        return (preferred[0] if preferred else None), None
    if x is None:
        rest = [n for n in preferred if n != y]
        return (rest[0], y) if rest else (y, None)
    if y is None:
        rest = [n for n in preferred if n != x]
        return x, (rest[0] if rest else None)
    return x, y


def _picture(path: list, target: Block, x: str | None, y: str | None) -> IterationPicture:
    loops: list[For] = []
    defs: dict[E.Var, E.PrimExpr] = {}  # block iter var -> its binding
    conds: list[E.PrimExpr] = []
    for node, child in zip(path[:-1], path[1:], strict=True):
        if isinstance(node, For):
            loops.append(node)
        elif isinstance(node, Block):
            _bind(node, defs, conds)
        elif isinstance(node, IfThenElse):
            conds.append(node.condition if child is node.then_case else E.Not(node.condition))
    _bind(target, defs, conds)

    by_name = {iv.var.name: iv for iv in target.iter_vars}
    axes = [by_name[n] for n in (x, y) if n is not None]
    loop_vars = {lp.loop_var: lp for lp in loops}
    needed: list[E.PrimExpr] = [iv.var for iv in axes] + conds
    relevant: set[E.Var] = set()
    for e in needed:
        relevant |= _loop_deps(e, defs, loop_vars, target.name)
    rel = [lp for lp in loops if lp.loop_var in relevant]

    nx = axes[0].extent if x is not None else 1
    ny = axes[1].extent if y is not None else 1
    strides, s = {}, 1
    for lp in reversed(loops):
        strides[lp.loop_var] = s
        s *= lp.extent
    first, visits = _enumerate(rel, strides, axes, conds, defs, nx, target.name)
    visits *= math.prod(lp.extent for lp in loops if lp.loop_var not in relevant)

    order = np.full(first.shape, -1, dtype=np.int64)
    hit = np.flatnonzero(first >= 0)
    ranked = hit[np.argsort(first[hit], kind="stable")]
    order[ranked] = np.arange(len(ranked))

    shape = (ny, nx)
    return IterationPicture(
        block=target.name,
        x=x,
        y=y,
        x_extent=nx,
        y_extent=ny,
        iter_vars=tuple(by_name),
        loops=tuple(LoopInfo(lp.loop_var.name, lp.extent, lp.kind, lp.thread_tag)
                    for lp in loops),
        first_visit=first.reshape(shape),
        order=order.reshape(shape),
        visits=visits.reshape(shape),
        x_tiles=_tiles(axes[0], defs, loop_vars) if x is not None else (),
        y_tiles=_tiles(axes[1], defs, loop_vars) if y is not None else (),
        predicated=bool(conds),
    )


def _bind(block: Block, defs: dict, conds: list) -> None:
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        defs[iv.var] = value
    if not (isinstance(block.predicate, E.IntImm) and block.predicate.value):
        conds.append(block.predicate)


def _loop_deps(e: E.PrimExpr, defs: dict, loop_vars: dict, block: str) -> set[E.Var]:
    """Loop variables ``e`` depends on, through the bindings of enclosing blocks."""
    out: set[E.Var] = set()
    for v in expr_vars(e):
        if v in loop_vars:
            out.add(v)
        elif v in defs:
            out |= _loop_deps(defs[v], defs, loop_vars, block)
        else:
            raise ValueError(
                f'block "{block}": `{e.script()}` uses `{v.name}`, which is neither a loop '
                "around the block nor an enclosing block's iteration variable"
            )
    return out


def _enumerate(rel: list[For], strides: dict, axes: list, conds: list, defs: dict, nx: int,
               block: str) -> tuple[np.ndarray, np.ndarray]:
    """Walk the relevant loops (all others sit at 0, which is their first visit) in
    chunks along the outermost one; returns flat ``first_visit`` and ``visits``."""
    extents = [lp.extent for lp in rel]
    total = math.prod(extents)
    if total > _MAX_POINTS:
        raise ValueError(
            f'block "{block}": {total:,} loop iterations to enumerate for this picture '
            f"(loops {', '.join(lp.loop_var.name for lp in rel)}); the limit is "
            f"{_MAX_POINTS:,}. Pick axes that fewer loops feed."
        )
    ny = axes[1].extent if len(axes) > 1 else 1
    first = np.full(nx * ny, -1, dtype=np.int64)
    visits = np.zeros(nx * ny, dtype=np.int64)
    inner = math.prod(extents[1:])
    step = max(1, _CHUNK_POINTS // max(inner, 1))
    outer = extents[0] if rel else 1
    for start in range(0, outer, step):
        stop = min(outer, start + step)
        shape = ((stop - start, *extents[1:])) if rel else ()
        env: dict[E.Var, Any] = {}
        for d, lp in enumerate(rel):
            lo, hi = (start, stop) if d == 0 else (0, lp.extent)
            env[lp.loop_var] = np.arange(lo, hi, dtype=np.int64).reshape(
                (-1,) + (1,) * (len(rel) - d - 1))
        ev = _Evaluator(env, defs, block)
        mask = np.ones(shape, dtype=bool)
        for c in conds:
            mask &= np.broadcast_to(ev(c), shape).astype(bool)
        coords = []
        for iv in axes:
            v = np.broadcast_to(ev(iv.var), shape)[mask]
            bad = (v < 0) | (v >= iv.extent)
            if bad.any():
                raise ValueError(
                    f'block "{block}": {iv.var.name} = `{defs[iv.var].script()}` reaches '
                    f"{int(v[bad][0])}, outside its extent [0, {iv.extent})"
                )
            coords.append(v)
        key = coords[0] if coords else np.zeros(int(mask.sum()), dtype=np.int64)
        if len(coords) > 1:
            key = coords[1] * nx + coords[0]
        rank = np.zeros((), dtype=np.int64)
        for lp in rel:
            rank = rank + env[lp.loop_var] * strides[lp.loop_var]
        rank = np.broadcast_to(rank, shape)[mask]
        # flat (C) order over the relevant loops is execution order, so the first
        # occurrence of a key is its first visit; earlier chunks come first
        uniq, idx = np.unique(key, return_index=True)
        new = first[uniq] < 0
        first[uniq[new]] = rank[idx[new]]
        visits += np.bincount(key, minlength=nx * ny)
    return first, visits


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod,
    E.Min: np.minimum,
    E.Max: np.maximum,
    E.EQ: np.equal,
    E.NE: np.not_equal,
    E.LT: np.less,
    E.LE: np.less_equal,
    E.GT: np.greater,
    E.GE: np.greater_equal,
    E.And: np.logical_and,
    E.Or: np.logical_or,
}


class _Evaluator:
    """Evaluates integer index expressions over broadcast loop-variable arrays.

    ``env`` maps loop variables to arrays; ``defs`` maps enclosing blocks' iteration
    variables to their bindings (evaluated once, on first use).
    """

    def __init__(self, env: dict, defs: dict, block: str):
        self.env = env
        self.defs = defs
        self.block = block

    def __call__(self, e: E.PrimExpr) -> Any:
        if isinstance(e, E.Var):
            if e not in self.env:
                self.env[e] = self(self.defs[e])
            return self.env[e]
        if isinstance(e, E.IntImm):
            return np.int64(e.value) if e.dtype != "bool" else np.bool_(e.value)
        op = _BINARY.get(type(e))
        if op is not None:
            assert isinstance(e, E.BinaryOp)
            if isinstance(e, (E.FloorDiv, E.FloorMod)):
                self._nonzero(e)
            return op(self(e.a), self(e.b))
        if isinstance(e, E.Div) and not E.is_float(e.dtype):
            self._nonzero(e)
            a, b = self(e.a), self(e.b)
            q = np.abs(a) // np.abs(b)
            return np.where((a < 0) != (b < 0), -q, q)
        if isinstance(e, E.Not):
            return np.logical_not(self(e.a))
        if isinstance(e, E.Select):
            return np.where(self(e.condition), self(e.true_value), self(e.false_value))
        if isinstance(e, E.Cast) and not E.is_float(e.dtype):
            return self(e.value)
        raise ValueError(
            f'block "{self.block}": cannot draw the iteration space: `{e.script()}` '
            f"({type(e).__name__}) is not integer index arithmetic"
        )

    def _nonzero(self, e: E.BinaryOp) -> None:
        if isinstance(e.b, E.IntImm) and e.b.value == 0:
            raise ValueError(f'block "{self.block}": `{e.script()}` divides by zero')


def _linear(e: E.PrimExpr, defs: dict, loop_vars: dict) -> tuple[dict, int] | None:
    """``e`` as ``sum(coef * loop_var) + const``, or None when it is not linear."""
    if isinstance(e, E.IntImm):
        return {}, e.value
    if isinstance(e, E.Var):
        if e in loop_vars:
            return {e: 1}, 0
        return _linear(defs[e], defs, loop_vars) if e in defs else None
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _linear(e.a, defs, loop_vars), _linear(e.b, defs, loop_vars)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        terms = dict(a[0])
        for v, c in b[0].items():
            terms[v] = terms.get(v, 0) + sign * c
        return terms, a[1] + sign * b[1]
    if isinstance(e, E.Mul):
        a, b = _linear(e.a, defs, loop_vars), _linear(e.b, defs, loop_vars)
        if a is None or b is None:
            return None
        if not a[0]:
            a, b = b, a
        if b[0]:
            return None  # product of two loop variables
        return {v: c * b[1] for v, c in a[0].items()}, a[1] * b[1]
    if isinstance(e, E.Cast) and not E.is_float(e.dtype):
        return _linear(e.value, defs, loop_vars)
    return None


def _tiles(iv: Any, defs: dict, loop_vars: dict) -> tuple[TileLevel, ...]:
    """Tile levels of an axis bound as ``c0 * l0 + c1 * l1 + ... + const``: every
    loop with a coefficient above 1 (and more than one iteration) starts a new tile
    every ``c`` positions."""
    lin = _linear(defs[iv.var], defs, loop_vars)
    if lin is None:
        return ()
    terms, cst = lin
    levels: list[TileLevel] = []
    seen: set[int] = set()
    for v, c in sorted(terms.items(), key=lambda t: -t[1]):
        if c <= 1 or c in seen or loop_vars[v].extent <= 1:
            continue
        seen.add(c)
        bounds = tuple(p for p in range(1, iv.extent) if (p - cst) % c == 0)
        if bounds:
            levels.append(TileLevel(v.name, c, bounds))
    return tuple(levels)


# ---------------------------------------------------------------------------
# the plot

_THEME = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "text.color": "#222222",
    "axes.labelcolor": "#222222",
    "axes.edgecolor": "#444444",
    "xtick.color": "#222222",
    "ytick.color": "#222222",
}
_UNVISITED = (1.0, 1.0, 1.0, 1.0)
_NOT_YET = (0.84, 0.84, 0.84, 1.0)


def plot_iteration_space(
    sch_or_func: Any,
    block: str | None = None,
    x: str | None = None,
    y: str | None = None,
    ax: Axes | None = None,
    *,
    shown: float = 1.0,
    annotate: bool | None = None,
    arrows: int | None = None,
    cmap: str = "viridis",
) -> Figure:
    """Draw a block's iteration space coloured by the order the schedule visits it.

    ``sch_or_func`` is a Schedule, PrimFunc or one-function IRModule (``block`` names
    the block; it may be left out when there is only one), or an
    :class:`IterationPicture` from :func:`visit_order`. Rows are ``y``, columns ``x``
    (defaults as in :func:`visit_order`). Lines mark tile boundaries from splits,
    thicker for outer levels. ``shown`` (0 to 1) colours only that fraction of the
    visits, greys the rest and rings the last one shown, to step through the order.
    ``annotate`` writes each point's visit number (default: grids up to 256 points);
    ``arrows`` joins the first that many visits with arrows (default: the first 16 on
    annotated grids). Draws into ``ax`` when given, else into a new white Figure
    (readable under light and dark notebook themes); returns the Figure.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.mm_relu(16, 16, 16))
    >>> i, j, k = sch.get_loops(sch.get_block("Y"))
    >>> j0, j1 = sch.split(j, factors=[None, 4])
    >>> sch.reorder(i, j0, k, j1)
    >>> fig = plot_iteration_space(sch, "Y")
    >>> fig.axes[0].get_title()
    'Y: i, j_0, k, j_1'
    """
    if isinstance(sch_or_func, IterationPicture):
        pic = sch_or_func
        if block is not None and block != pic.block:
            raise ValueError(f'the picture is of block "{pic.block}", not "{block}"')
        if (x is not None and x != pic.x) or (y is not None and y != pic.y):
            raise ValueError(f"the picture's axes are x={pic.x!r}, y={pic.y!r}; "
                             f"call visit_order for x={x!r}, y={y!r}")
    else:
        if block is None:
            names = block_names(_as_func(sch_or_func))
            if len(names) != 1:
                raise ValueError(f"name the block to draw; the function has {names}")
            block = names[0]
        pic = visit_order(sch_or_func, block, x, y)
    if not 0.0 <= shown <= 1.0:
        raise ValueError(f"shown is a fraction of the visits, between 0 and 1; got {shown}")

    import matplotlib as mpl

    with mpl.rc_context(_THEME if ax is None else {}):
        if ax is None:
            from matplotlib.figure import Figure

            fig = Figure(figsize=_figsize(pic), layout="constrained")
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        _draw(pic, ax, shown, annotate, arrows, cmap)
    return fig


def _figsize(pic: IterationPicture) -> tuple[float, float]:
    ny, nx = pic.shape
    width = 6.4
    grid_h = (width - 1.6) * ny / nx
    return width, float(min(max(grid_h, 0.6), 7.0) + 1.3)


def _draw(pic: IterationPicture, ax: Axes, shown: float, annotate: bool | None,
          arrows: int | None, cmap_name: str) -> None:
    import matplotlib as mpl
    import matplotlib.patheffects as pe
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    ny, nx = pic.shape
    n = pic.num_points
    cutoff = n if shown >= 1.0 else int(math.floor(shown * n + 1e-9))
    cmap = mpl.colormaps[cmap_name]
    norm = Normalize(vmin=0, vmax=max(n - 1, 1))
    rgba = cmap(norm(np.maximum(pic.order, 0)))
    rgba[pic.order >= cutoff] = _NOT_YET
    rgba[pic.order < 0] = _UNVISITED
    ax.imshow(rgba, origin="upper", interpolation="nearest", aspect="equal",
              extent=(-0.5, nx - 0.5, ny - 0.5, -0.5))

    # tile boundaries, outer levels thicker (and never heavy next to small tiles);
    # white with a dark edge shows on any colour
    cell_pt = _axes_width_in(ax) * 72 / max(nx, ny)
    for tiles, vertical in ((pic.x_tiles, True), (pic.y_tiles, False)):
        for level, t in enumerate(tiles):
            lw = max(min(3.0 - 1.0 * level, t.size * cell_pt / 14), 0.6)
            effects = [pe.withStroke(linewidth=lw + max(0.8, lw * 0.5), foreground="#222222")]
            pos = [b - 0.5 for b in t.boundaries]
            if vertical:
                lines = ax.vlines(pos, -0.5, ny - 0.5, colors="white", linewidths=lw)
            else:
                lines = ax.hlines(pos, -0.5, nx - 0.5, colors="white", linewidths=lw)
            lines.set_path_effects(effects)

    pts = pic.points_in_order()
    if annotate is None:
        annotate = nx * ny <= _ANNOTATE_CELLS
    if annotate and cutoff:
        _annotate(ax, pic, pts[:cutoff], rgba, nx)
    if arrows is None:
        arrows = 16 if annotate else 0
    steps = min(arrows, cutoff - 1)
    for (y0, x0), (y1, x1) in zip(pts[:steps], pts[1:steps + 1], strict=True):
        # a step to a neighbour is straight; a jump arcs, so it cannot hide other steps
        dist = math.hypot(int(x1) - int(x0), int(y1) - int(y0))
        bend = 0.0 if dist <= 1 else 0.45 / dist  # the arc rises about half a cell
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), in_layout=False, arrowprops=dict(
            arrowstyle="-|>", color="#d62728", lw=1.2, alpha=0.85, shrinkA=4, shrinkB=4,
            connectionstyle=f"arc3,rad={bend:.3f}"))
    if 0 < cutoff < n:
        yl, xl = pts[cutoff - 1]
        ax.add_patch(Rectangle((xl - 0.5, yl - 0.5), 1, 1, fill=False, edgecolor="#d62728",
                               linewidth=2.0))

    ax.set_xlim(-0.5, nx - 0.5)
    ax.set_ylim(ny - 0.5, -0.5)
    ax.set_xlabel(f"{pic.x} (extent {nx})" if pic.x else "")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    if pic.y is not None:
        ax.set_ylabel(f"{pic.y} (extent {ny})")
        ax.yaxis.set_major_locator(MaxNLocator(nbins=min(ny, 16), integer=True))
    else:
        ax.set_yticks([])
    ax.xaxis.set_major_locator(MaxNLocator(nbins=min(nx, 16), integer=True))
    title = pic.title
    if cutoff < n:
        title += f"\nfirst {cutoff} of {n} points shown"
    ax.set_title(title, fontsize=11)

    sm = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
    bar = ax.figure.colorbar(sm, ax=ax, location="bottom", shrink=0.8, aspect=40, pad=0.02)
    bar.set_label("visit order")


def _axes_width_in(ax: Axes) -> float:
    """Roughly how wide the axes are drawn, in inches (before layout)."""
    return ax.figure.get_figwidth() * ax.get_position().width


def _annotate(ax: Axes, pic: IterationPicture, pts: np.ndarray, rgba: np.ndarray, nx: int
              ) -> None:
    cell_pt = _axes_width_in(ax) * 72 / nx
    digits = len(str(max(pic.num_points - 1, 0)))
    size = max(min(cell_pt * 0.9 / max(digits, 2) * 1.3, 9.0), 4.0)
    for yy, xx in pts:
        r, g, b, _ = rgba[yy, xx]
        light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5
        ax.text(xx, yy, str(pic.order[yy, xx]), ha="center", va="center", fontsize=size,
                color="black" if light else "white", in_layout=False)


# ---------------------------------------------------------------------------
# the state behind the view (plain Python; the ipywidgets view binds to it)


class IterationModel:
    """What :class:`~workbench.widgets.iteration_view.IterationView` shows: a function,
    a block, two axes and how much of the visit order to colour.

    Constructor arguments are checked (``ValueError`` names the bad block or axis);
    later changes never raise: a block that disappears (after ``compute_inline``,
    ``decompose_reduction``...) or an IR the picture cannot evaluate becomes
    :attr:`error`, shown in place of the picture. Pictures are cached, so moving the
    ``shown`` fraction only redraws.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
    >>> model = IterationModel(sch, "Y")
    >>> model.x, model.y, model.axes
    ('vj', 'vi', ('vi', 'vj', 'vk'))
    >>> model.set_x("vi")        # taking y's axis swaps the two
    >>> model.x, model.y
    ('vi', 'vj')
    >>> init = sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[2])
    >>> model.update(sch)
    >>> model.error
    'block "Y" is not in mm_relu any more; its blocks: Y_init, Y_update, C'
    """

    def __init__(self, sch_or_func: Any, block: str | None = None, x: str | None = None,
                 y: str | None = None):
        self.func = _as_func(sch_or_func)
        if block is None:
            names = block_names(self.func)
            if not names:
                raise ValueError(f"{self.func.name} has no blocks to draw")
            block = names[0]
        pic = visit_order(self.func, block, x, y)
        self.block: str = block
        self.x: str | None = pic.x
        self.y: str | None = pic.y
        #: Fraction (0 to 1) of the visit order coloured; the rest is grey.
        self.shown: float = 1.0
        #: Why there is no picture (None when there is one).
        self.error: str | None = None
        self._cache: tuple[tuple, IterationPicture] | None = (self._key(), pic)

    # ---------------------------------------------------------------- queries
    @property
    def blocks(self) -> list[str]:
        """Names of the function's blocks, in program order."""
        return block_names(self.func)

    @property
    def axes(self) -> tuple[str, ...]:
        """The current block's iteration variables (empty if the block is gone)."""
        path = block_path(self.func, self.block)
        if path is None or path[-1] is self.func.body:
            return ()
        blk = path[-1]
        assert isinstance(blk, Block)
        return tuple(iv.var.name for iv in blk.iter_vars)

    @property
    def picture(self) -> IterationPicture | None:
        """The current picture, or None (see :attr:`error`)."""
        if self._cache is not None and self._cache[0] == self._key():
            return self._cache[1]
        return None

    # ---------------------------------------------------------------- changes
    def update(self, sch_or_func: Any) -> None:
        """Show a new version of the function (e.g. after a schedule primitive),
        keeping the block and the axes when they still exist."""
        try:
            self.func = _as_func(sch_or_func)
        except (TypeError, ValueError) as exc:
            self.error = str(exc)
            self._cache = None
            return
        axes = self.axes
        if not axes and self.block not in self.blocks:
            self._fail(f'block "{self.block}" is not in {self.func.name} any more; its '
                       f"blocks: {', '.join(self.blocks) or 'none'}")
            return
        if self.x not in axes or (self.y is not None and self.y not in axes):
            self.x, self.y = None, None
        self._refresh()

    def select_block(self, block: str) -> None:
        """Draw another block, on the same axes if it has them, else on its defaults."""
        self.block = block
        axes = self.axes
        if self.x not in axes or (self.y is not None and self.y not in axes):
            self.x, self.y = None, None
        self._refresh()

    def set_axes(self, x: str | None, y: str | None) -> None:
        """Choose both axes (None: the default for that axis)."""
        self.x, self.y = x, y
        self._refresh()

    def set_x(self, x: str) -> None:
        """Choose the column axis; choosing the row axis swaps the two."""
        y = self.y
        if x == y:
            y = self.x
        self.set_axes(x, y)

    def set_y(self, y: str) -> None:
        """Choose the row axis; choosing the column axis swaps the two."""
        x = self.x
        if y == x:
            x = self.y
        self.set_axes(x, y)

    def set_shown(self, fraction: float) -> None:
        """Colour only the first ``fraction`` (0 to 1) of the visits."""
        self.shown = min(max(float(fraction), 0.0), 1.0)

    # ---------------------------------------------------------------- output
    def figure(self) -> Figure | None:
        """The current picture drawn with :func:`plot_iteration_space` (None on error)."""
        pic = self.picture
        if pic is None:
            return None
        return plot_iteration_space(pic, shown=self.shown)

    def html(self) -> str:
        """The picture as inline SVG on a white card, or the error as a message."""
        import html as _html

        fig = self.figure() if self.error is None else None
        if fig is None:
            text = _html.escape(self.error or "nothing to draw")
            return (
                '<div class="wb-iteration-error" style="color:#9b1c1c;background:#fff5f5;'
                'border:1px solid #e5a0a0;border-radius:4px;padding:6px 10px;'
                f'font-family:monospace;white-space:pre-wrap">{text}</div>'
            )
        svg = figure_svg(fig).replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)
        label = _html.escape(f"visit order of block {self.picture.title}", quote=True)
        return (
            f'<div class="wb-iteration" role="img" aria-label="{label}" style="background:#fff;'
            f'border-radius:4px;padding:4px;display:inline-block;max-width:100%">{svg}</div>'
        )

    # ---------------------------------------------------------------- internals
    def _key(self) -> tuple:
        return (self.func, self.block, self.x, self.y)

    def _fail(self, message: str) -> None:
        self.error = message
        self._cache = None

    def _refresh(self) -> None:
        """Recompute the picture; on failure keep the message, never raise."""
        try:
            pic = visit_order(self.func, self.block, self.x, self.y)
        except (ValueError, TypeError) as exc:
            self._fail(str(exc))
            return
        self.x, self.y = pic.x, pic.y
        self.error = None
        self._cache = (self._key(), pic)
