"""``LoopTree``: the editor's loop tree, an anywidget (a small ES module, no build step).

Every row is a block or a loop of the function, nested and collapsible; each shows its
name, extent and kind (``serial``, ``parallel``, ``vectorized``, ``unrolled``, the
thread it is bound to; a block its iter-var kinds). A click selects a row, the keyboard
moves the selection (Up/Down, Left collapses or goes to the parent, Right expands,
Home/End), dragging a loop row onto another loop of the same chain reorders the loops,
and the legal compute_at / reverse_compute_at targets can be highlighted.

The front end (``static/looptree.js``) only draws the rows and sends what the user did
as messages (``{"type": "select", "index": 3}``, ``{"type": "key", "key": "ArrowDown"}``,
``{"type": "toggle", "index": 0}``, ``{"type": "drop", "source": 4, "target": 2}``).
What they mean (what is visible, where a key moves, which drops are legal, the reorder a
drop asks for) is decided here, by the plain functions below, so it is tested without a
browser:

>>> import workbench as wb
>>> from workbench.widgets.editor_model import tree_of
>>> items = tree_of(wb.workloads.mm_relu(64, 64, 64))
>>> [(n, t.name) for n, t in enumerate(items)][:4]
[(0, 'i'), (1, 'j'), (2, 'k'), (3, 'Y')]
>>> drop_order(items, 2, 1)            # drop k onto j: k moves to j's place
[2, 1]
>>> drop_order(items, 0, 5) is None    # i above Y and j above C: not one chain
True
>>> navigate(items, 0, "ArrowDown", set())
(1, set())
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import anywidget
import traitlets

__all__ = [
    "KEYS",
    "LoopTree",
    "ReorderList",
    "children",
    "drop_order",
    "drop_targets",
    "move",
    "navigate",
    "parents",
    "row_keys",
    "rows_json",
    "visible",
]

STATIC = pathlib.Path(__file__).parent / "static"
KEYS = ("ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End")


# ------------------------------------------------------------ tree structure
# ``items`` are the rows in program order, each with ``kind`` ("block"/"loop"),
# ``name`` and ``depth`` (0 = top level; a row's children follow it one level deeper):
# the TreeItems of ``EditorModel.tree()``.

def parents(items: Sequence[Any]) -> list[int]:
    """The index of each row's parent row (-1 at the top level).

    >>> from types import SimpleNamespace as R
    >>> parents([R(depth=0), R(depth=1), R(depth=2), R(depth=1), R(depth=0)])
    [-1, 0, 1, 0, -1]
    """
    out: list[int] = []
    stack: list[int] = []  # open ancestors, innermost last
    for n, item in enumerate(items):
        del stack[item.depth:]
        out.append(stack[-1] if stack else -1)
        stack.append(n)
    return out


def children(items: Sequence[Any]) -> list[list[int]]:
    """The indices of each row's direct children."""
    out: list[list[int]] = [[] for _ in items]
    for n, p in enumerate(parents(items)):
        if p >= 0:
            out[p].append(n)
    return out


def row_keys(items: Sequence[Any]) -> list[str]:
    """A key per row that survives unrelated changes of the IR (the collapse state is
    kept by key): the names from the top down, ``#n`` for the n-th sibling of one name.

    >>> import workbench as wb
    >>> from workbench.widgets.editor_model import tree_of
    >>> row_keys(tree_of(wb.workloads.mm_relu(8, 8, 8)))[3:6]
    ['loop:i/loop:j/loop:k/block:Y', 'loop:i#1', 'loop:i#1/loop:j']
    """
    keys: list[str] = []
    seen: dict[tuple[int, str], int] = {}
    for n, p in enumerate(parents(items)):
        own = f"{items[n].kind}:{items[n].name}"
        count = seen.get((p, own), 0)
        seen[(p, own)] = count + 1
        if count:
            own += f"#{count}"
        keys.append(f"{keys[p]}/{own}" if p >= 0 else own)
    return keys


def visible(items: Sequence[Any], collapsed: set[int]) -> list[int]:
    """The rows shown when the rows in ``collapsed`` (indices) are collapsed: those with
    no collapsed ancestor."""
    up = parents(items)
    out = []
    for n in range(len(items)):
        p = up[n]
        while p >= 0 and p not in collapsed:
            p = up[p]
        if p < 0:
            out.append(n)
    return out


def reveal(items: Sequence[Any], index: int, collapsed: set[int]) -> set[int]:
    """``collapsed`` without the ancestors of row ``index`` (so that row is shown)."""
    up = parents(items)
    out = set(collapsed)
    p = up[index] if 0 <= index < len(items) else -1
    while p >= 0:
        out.discard(p)
        p = up[p]
    return out


def navigate(items: Sequence[Any], selected: int, key: str,
             collapsed: set[int]) -> tuple[int, set[int]]:
    """Where ``key`` moves the selection, and the collapsed rows afterwards (the WAI-ARIA
    tree pattern): Up/Down go to the previous/next shown row, Home/End to the first/last,
    Right expands a collapsed row (or goes to its first child), Left collapses an open
    row (or goes to the parent). ``selected`` is -1 when nothing is selected.

    >>> import workbench as wb
    >>> from workbench.widgets.editor_model import tree_of
    >>> items = tree_of(wb.workloads.mm_relu(8, 8, 8))
    >>> navigate(items, 1, "ArrowLeft", set())      # j is open: collapse it
    (1, {1})
    >>> navigate(items, 1, "ArrowLeft", {1})        # j is closed: go to i
    (0, {1})
    >>> navigate(items, 1, "ArrowDown", {1})        # k and Y are hidden: next is the 2nd i
    (4, {1})
    """
    if key not in KEYS:
        raise ValueError(f"navigate: unknown key {key!r}; keys: {', '.join(KEYS)}")
    collapsed = set(collapsed)
    shown = visible(items, collapsed)
    if not shown:
        return -1, collapsed
    if selected not in shown:
        return (shown[-1] if key in ("ArrowUp", "End") else shown[0]), collapsed
    at = shown.index(selected)
    kids = children(items)[selected]
    if key == "ArrowUp":
        return shown[max(at - 1, 0)], collapsed
    if key == "ArrowDown":
        return shown[min(at + 1, len(shown) - 1)], collapsed
    if key == "Home":
        return shown[0], collapsed
    if key == "End":
        return shown[-1], collapsed
    if key == "ArrowRight":
        if kids and selected in collapsed:
            collapsed.discard(selected)
            return selected, collapsed
        return (kids[0] if kids else selected), collapsed
    # ArrowLeft
    if kids and selected not in collapsed:
        collapsed.add(selected)
        return selected, collapsed
    parent = parents(items)[selected]
    return (parent if parent >= 0 else selected), collapsed


def _chain_below(items: Sequence[Any], kids: list[list[int]], index: int) -> list[int]:
    """``index`` and the loops nested straight below it: each the only child of the one
    above (what one ``reorder`` can rearrange together with ``index``)."""
    chain = [index]
    while len(kids[chain[-1]]) == 1 and items[kids[chain[-1]][0]].kind == "loop":
        chain.append(kids[chain[-1]][0])
    return chain


def drop_chain(items: Sequence[Any], source: int, target: int) -> list[int] | None:
    """The loops from the outer to the inner of ``source`` and ``target`` when they are
    two different loops of one chain (one above the other, each loop in between the only
    child of its parent), else None."""
    n = len(items)
    if not (0 <= source < n and 0 <= target < n) or source == target:
        return None
    if items[source].kind != "loop" or items[target].kind != "loop":
        return None
    outer, inner = min(source, target), max(source, target)
    chain = _chain_below(items, children(items), outer)
    if inner not in chain:
        return None
    return chain[:chain.index(inner) + 1]


def drop_order(items: Sequence[Any], source: int, target: int) -> list[int] | None:
    """The loops (row indices, in their new order) to pass to ``reorder`` when loop row
    ``source`` is dropped on loop row ``target``: ``source`` takes ``target``'s place
    and the loops in between shift by one. None when the drop is not legal."""
    chain = drop_chain(items, source, target)
    if chain is None:
        return None
    order = [i for i in chain if i != source]
    order.insert(chain.index(target), source)
    return order


def drop_targets(items: Sequence[Any]) -> dict[int, list[int]]:
    """For each loop row, the loop rows it may be dropped on (the front end highlights
    them while dragging and refuses the others)."""
    kids = children(items)
    out: dict[int, list[int]] = {n: [] for n, t in enumerate(items) if t.kind == "loop"}
    for n in out:
        for m in _chain_below(items, kids, n)[1:]:
            out[n].append(m)
            out[m].append(n)
    return {n: sorted(v) for n, v in out.items()}


def kind_text(item: Any) -> str:
    """What a tree row shows as its kind: a loop's kind or thread, a block's
    reduction / spatial / opaque."""
    if item.kind == "block":
        kinds = getattr(item, "iter_kinds", None) or ""
        return "reduction" if "R" in kinds else ("opaque" if "O" in kinds else "spatial")
    if item.loop_kind == "thread_binding":
        return str(item.thread)
    return str(item.loop_kind or "serial")


def rows_json(items: Sequence[Any], collapsed: set[int]) -> list[dict[str, Any]]:
    """The rows as the front end draws them (JSON-ready)."""
    shown = set(visible(items, collapsed))
    kids = children(items)
    out = []
    for n, item in enumerate(items):
        iter_kinds = getattr(item, "iter_kinds", None)
        out.append({
            "index": n,
            "kind": item.kind,
            "name": item.name,
            "block": getattr(item, "block", None) or "",
            "depth": item.depth,
            "extent": None if item.extent is None else str(item.extent),
            "detail": kind_text(item),
            "iter_kinds": " ".join(iter_kinds) if iter_kinds else "",
            "parallel": item.kind == "loop" and (item.loop_kind or "serial") != "serial",
            "has_children": bool(kids[n]),
            "expanded": bool(kids[n]) and n not in collapsed,
            "hidden": n not in shown,
        })
    return out


# --------------------------------------------------------------- the widget
class LoopTree(anywidget.AnyWidget):
    """A collapsible tree of a function's blocks and loops (see the module docstring).

    ``items`` are :class:`~workbench.widgets.editor_model.TreeItem` rows (or a PrimFunc
    / Schedule, whose tree is taken). ``on_select(callback)`` is called with the row
    index the user selected, ``on_drop(callback)`` with ``(source, target, order)`` for
    a legal drop and ``on_error(callback)`` with the message of an illegal one. Without
    a select callback the tree selects the row itself.

    >>> import workbench as wb
    >>> tree = LoopTree(wb.workloads.mm_relu(16, 16, 16))
    >>> tree.handle({"type": "select", "index": 2})
    >>> tree.selected, tree.items[2].name
    (2, 'k')
    >>> tree.handle({"type": "key", "key": "ArrowUp"}); tree.selected
    1
    """

    _esm = STATIC / "looptree.js"
    _css = STATIC / "looptree.css"

    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    targets = traitlets.List(traitlets.Int()).tag(sync=True)
    drop_targets = traitlets.Dict().tag(sync=True)  # str(row) -> [rows], JSON keys
    collapsed = traitlets.List(traitlets.Unicode()).tag(sync=True)  # row keys

    def __init__(self, items: Any = (), selected: int = -1, **kwargs: Any):
        super().__init__(**kwargs)
        self._items: list[Any] = []
        self._keys: list[str] = []
        self._select_callbacks: list[Callable[[int], None]] = []
        self._drop_callbacks: list[Callable[[int, int, list[int]], None]] = []
        self._error_callbacks: list[Callable[[str], None]] = []
        self.on_msg(self._on_msg)
        self.add_class("wb-looptree-widget")
        self.set_items(_as_items(items), selected)

    def __repr__(self) -> str:
        return f"LoopTree({len(self.rows)} rows, selected={self.selected})"

    # ----------------------------------------------------------- Python side
    @property
    def items(self) -> list[Any]:
        """The rows (TreeItems), in program order."""
        return list(self._items)

    @property
    def collapsed_rows(self) -> set[int]:
        """Indices of the collapsed rows."""
        keys = set(self.collapsed)
        return {n for n, k in enumerate(self._keys) if k in keys}

    @property
    def visible_rows(self) -> list[int]:
        """Indices of the rows shown (no collapsed ancestor)."""
        return visible(self._items, self.collapsed_rows)

    def set_items(self, items: Sequence[Any], selected: int = -1) -> None:
        """Show new rows (after a step): collapsed rows stay collapsed when their key is
        still there; the selected row is revealed."""
        items = list(items)
        keys = row_keys(items)
        before = set(self.collapsed)
        kept = {n for n, k in enumerate(keys) if k in before}
        self._items, self._keys = items, keys
        selected = selected if 0 <= selected < len(items) else -1
        if selected >= 0:
            kept = reveal(items, selected, kept)
        with self.hold_trait_notifications():
            self._set_collapsed(kept)
            self.drop_targets = {str(k): v for k, v in drop_targets(items).items()}
            self.targets = [t for t in self.targets if t < len(items)]
            self.selected = selected

    def set_targets(self, rows: Sequence[int]) -> None:
        """Highlight these rows (legal compute_at targets); ``[]`` clears."""
        self.targets = sorted(int(r) for r in rows)

    def set_selected(self, index: int) -> None:
        """Mark row ``index`` selected (revealing it) without calling ``on_select``."""
        if not -1 <= index < len(self._items):
            raise IndexError(f"loop tree: no row {index} (rows: {len(self._items)})")
        if index >= 0:
            self._set_collapsed(reveal(self._items, index, self.collapsed_rows))
        self.selected = index

    def toggle(self, index: int) -> None:
        """Collapse an open row or expand a collapsed one; a selection inside a row being
        collapsed moves to that row."""
        if not 0 <= index < len(self._items) or not children(self._items)[index]:
            return
        collapsed = self.collapsed_rows
        if index in collapsed:
            collapsed.discard(index)
            self._set_collapsed(collapsed)
            return
        collapsed.add(index)
        self._set_collapsed(collapsed)
        up = parents(self._items)
        p = up[self.selected] if self.selected >= 0 else -1
        while p >= 0 and p != index:
            p = up[p]
        if p == index:
            self._choose(index)

    def key(self, key: str) -> None:
        """Move the selection as the key would (see :func:`navigate`)."""
        index, collapsed = navigate(self._items, self.selected, key, self.collapsed_rows)
        self._set_collapsed(collapsed)
        if index != self.selected and index >= 0:
            self._choose(index)

    def drop(self, source: int, target: int) -> list[int] | None:
        """Loop row ``source`` dropped on loop row ``target``: calls ``on_drop`` with the
        reorder it means, or ``on_error`` when the two are not loops of one chain."""
        order = drop_order(self._items, source, target)
        if order is None:
            names = [self._items[i].name if 0 <= i < len(self._items) else f"row {i}"
                     for i in (source, target)]
            self._error(f"reorder: cannot drop loop {names[0]} on {names[1]}: only loops "
                        "nested in one chain (each the only child of the one above) can be "
                        "reordered")
            return None
        for callback in list(self._drop_callbacks):
            callback(source, target, order)
        return order

    def on_select(self, callback: Callable[[int], None]) -> None:
        self._select_callbacks.append(callback)

    def on_drop(self, callback: Callable[[int, int, list[int]], None]) -> None:
        self._drop_callbacks.append(callback)

    def on_error(self, callback: Callable[[str], None]) -> None:
        self._error_callbacks.append(callback)

    def handle(self, content: dict) -> None:
        """Act on one message of the front end (what a click, key or drop sends)."""
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "select":
            index = int(content["index"])
            if 0 <= index < len(self._items):
                self._choose(index)
        elif kind == "toggle":
            self.toggle(int(content["index"]))
        elif kind == "key":
            if content.get("key") in KEYS:
                self.key(str(content["key"]))
        elif kind == "drop":
            self.drop(int(content["source"]), int(content["target"]))

    # ------------------------------------------------------------- internals
    def _on_msg(self, _widget: Any, content: Any, _buffers: Any = None) -> None:
        try:
            self.handle(content)
        except Exception as e:  # noqa: BLE001 - a front-end event never raises
            self._error(f"loop tree: {type(e).__name__}: {e}")

    def _choose(self, index: int) -> None:
        if self._select_callbacks:
            for callback in list(self._select_callbacks):
                callback(index)
        else:
            self.set_selected(index)

    def _error(self, message: str) -> None:
        for callback in list(self._error_callbacks):
            callback(message)

    def _set_collapsed(self, rows: set[int]) -> None:
        kids = children(self._items)
        keys = [self._keys[n] for n in sorted(rows) if 0 <= n < len(self._items) and kids[n]]
        with self.hold_trait_notifications():
            self.collapsed = keys
            self.rows = rows_json(self._items, set(rows))


def _as_items(items: Any) -> list[Any]:
    from ..ir import IRModule, PrimFunc
    from ..schedule import Schedule
    from .editor_model import tree_of

    if isinstance(items, Schedule):
        items = items.func
    if isinstance(items, IRModule):
        items = Schedule(items).func
    if isinstance(items, PrimFunc):
        return tree_of(items)
    return list(items)


# ------------------------------------------------------------ reorder control
def move(order: Sequence[str], index: int, delta: int) -> list[str]:
    """``order`` with the entry at ``index`` moved by ``delta`` places (clamped at the
    ends): the up/down buttons of the reorder list. Nothing is ever lost.

    >>> move(["j_0", "j_1", "k"], 2, -1)
    ['j_0', 'k', 'j_1']
    >>> move(["j_0", "j_1", "k"], 0, -1)
    ['j_0', 'j_1', 'k']
    """
    out = list(order)
    if not 0 <= index < len(out):
        return out
    to = min(max(index + delta, 0), len(out) - 1)
    out.insert(to, out.pop(index))
    return out


class ReorderList(anywidget.AnyWidget):
    """The loops of a chain as rows with up/down buttons: the order can change, no loop
    can be lost or repeated. ``value`` is the order (outermost first); setting it to
    anything but a permutation of ``items`` is refused.

    >>> r = ReorderList(["j_0", "j_1", "k"])
    >>> r.handle({"type": "move", "index": 2, "delta": -1}); r.value
    ['j_0', 'k', 'j_1']
    """

    _esm = STATIC / "reorder.js"
    _css = STATIC / "looptree.css"

    items = traitlets.List(traitlets.Unicode()).tag(sync=True)
    value = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, items: Sequence[str] = (), **kwargs: Any):
        super().__init__(**kwargs)
        self.add_class("wb-reorder-widget")
        self.on_msg(self._on_msg)
        self.set_items(items)

    def __repr__(self) -> str:
        return f"ReorderList({self.value})"

    @traitlets.validate("value")
    def _check_value(self, proposal: Any) -> list[str]:
        value = list(proposal["value"])
        if sorted(value) != sorted(self.items):
            raise traitlets.TraitError(
                f"reorder: the order {value} must list each of {list(self.items)} once")
        return value

    def set_items(self, names: Sequence[str]) -> None:
        """Show a new chain, in its current order."""
        with self.hold_trait_notifications():
            self.items = list(names)
            self.value = list(names)

    def move(self, index: int, delta: int) -> None:
        """Move the loop at ``index`` up (``delta`` < 0) or down."""
        self.value = move(self.value, index, delta)

    def handle(self, content: dict) -> None:
        """Act on one message of the front end (an up or down button)."""
        if isinstance(content, dict) and content.get("type") == "move":
            self.move(int(content["index"]), int(content["delta"]))

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any = None) -> None:
        try:
            self.handle(content)
        except (KeyError, TypeError, ValueError):
            pass  # a malformed message changes nothing
