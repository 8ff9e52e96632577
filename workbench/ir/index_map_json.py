"""TVM's JSON form of an :class:`~workbench.ir.IndexMap` (``tvm.ir.save_json``): a
node graph ``{"root_index": r, "nodes": [...], "metadata": {...}}`` whose nodes refer to
each other by position. Only the nodes an index map uses are read and written:
``ir.Var``, ``ir.IntImm``, ``ir.FloatImm``, ``ir.PrimType``, ``ffi.String``, ``int``,
``ffi.Array``, the integer arithmetic (``prim.Add`` ... ``prim.Max``), ``prim.Cast`` and
``tirx.IndexMap``. Reading builds nodes from data only; anything else is refused with
:class:`~workbench.ir.index_map.IndexMapError`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .expr import (
    ALL_DTYPES,
    Add,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Sub,
    Var,
)
from .index_map import IndexMap, IndexMapError, _unify

__all__ = ["GraphWriter", "read_graph"]


_BIN_TYPES = {Add: "prim.Add", Sub: "prim.Sub", Mul: "prim.Mul", FloorDiv: "prim.FloorDiv",
              FloorMod: "prim.FloorMod", Min: "prim.Min", Max: "prim.Max", Div: "prim.Div"}
_BIN_CLASSES = {v: k for k, v in _BIN_TYPES.items()}


class GraphWriter:
    """Nodes in post-order (references point to earlier nodes), shared objects once."""

    def __init__(self) -> None:
        self.nodes: list[dict] = [{"type": "None"}]
        self.memo: dict[Any, int] = {}

    def _add(self, key: Any, node: dict) -> int:
        if key is not None and key in self.memo:
            return self.memo[key]
        self.nodes.append(node)
        idx = len(self.nodes) - 1
        if key is not None:
            self.memo[key] = idx
        return idx

    def dtype(self, dtype: str) -> int:
        key = ("type", dtype)
        if key in self.memo:
            return self.memo[key]
        return self._add(key, {"type": "ir.PrimType", "data": {"span": 0, "dtype": dtype}})

    def string(self, s: str) -> int:
        key = ("str", s)
        if key in self.memo:
            return self.memo[key]
        return self._add(key, {"type": "ffi.String", "data": s})

    def integer(self, v: int) -> int:
        key = ("int", v)
        if key in self.memo:
            return self.memo[key]
        return self._add(key, {"type": "int", "data": v})

    def expr(self, e: PrimExpr) -> int:
        key = ("obj", id(e))
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, Var):
            ty = self.dtype(e.dtype)
            name = self.string(e.name)
            node = {"type": "ir.Var", "data": {"span": 0, "ty": ty, "name": name}}
        elif isinstance(e, IntImm):
            ty = self.dtype(e.dtype)
            value = self.integer(int(e.value))
            node = {"type": "ir.IntImm", "data": {"span": 0, "ty": ty, "value": value}}
        elif isinstance(e, FloatImm):
            ty = self.dtype(e.dtype)
            node = {"type": "ir.FloatImm", "data": {"span": 0, "ty": ty, "value": float(e.value)}}
        elif type(e) in _BIN_TYPES:
            ty = self.dtype(e.dtype)
            a, b = self.expr(e.a), self.expr(e.b)
            node = {"type": _BIN_TYPES[type(e)], "data": {"span": 0, "ty": ty, "a": a, "b": b}}
        elif isinstance(e, Cast):
            ty = self.dtype(e.dtype)
            v = self.expr(e.value)
            node = {"type": "prim.Cast", "data": {"span": 0, "ty": ty, "value": v}}
        else:
            raise IndexMapError(f"{type(e).__name__} cannot be written in an index map's JSON")
        return self._add(key, node)

    def array(self, items: list[int]) -> int:
        return self._add(None, {"type": "ffi.Array", "data": items})

    def index_map(self, m: IndexMap) -> int:
        init = self.array([self.expr(v) for v in m.initial_indices])
        final = self.array([self.expr(e) for e in m.final_indices])
        inverse = self.index_map(m.inverse_index_map) if m.inverse_index_map is not None else 0
        return self._add(None, {"type": "tirx.IndexMap", "data": {
            "initial_indices": init, "final_indices": final, "inverse_index_map": inverse}})


def read_graph(text: str | Mapping) -> IndexMap:
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
        nodes = data["nodes"]
        root = data["root_index"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise IndexMapError(f"not TVM's JSON form of an index map: {e}") from None
    if not isinstance(nodes, list) or not isinstance(root, int):
        raise IndexMapError("not TVM's JSON form of an index map: bad nodes / root_index")
    memo: dict[int, Any] = {}
    busy: set[int] = set()

    def get(i: Any) -> Any:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(nodes):
            raise IndexMapError(f"index map JSON: bad node reference {i!r}")
        if i in memo:
            return memo[i]
        if i in busy:
            raise IndexMapError("index map JSON: a node refers to itself")
        busy.add(i)
        memo[i] = value = build(nodes[i])
        return value

    def build(node: Any) -> Any:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise IndexMapError(f"index map JSON: malformed node {node!r}")
        t, d = node["type"], node.get("data")
        try:
            if t == "None":
                return None
            if t == "ir.PrimType":
                dtype = d["dtype"]
                if dtype not in ALL_DTYPES:
                    raise IndexMapError(f"index map JSON: unsupported dtype {dtype!r}")
                return dtype
            if t == "ffi.String":
                if not isinstance(d, str):
                    raise IndexMapError("index map JSON: a string node holds no string")
                return d
            if t in ("int", "float", "bool"):
                if not isinstance(d, (int, float)):
                    raise IndexMapError(f"index map JSON: bad number {d!r}")
                return d
            if t == "ffi.Array":
                return [get(x) for x in d]
            if t == "ir.Var":
                return Var(get(d["name"]), get(d["ty"]))
            if t == "ir.IntImm":
                v = d["value"]
                v = get(v) if not isinstance(v, bool) and isinstance(v, int) and \
                    node_is_number(v) else v
                return IntImm(int(v), get(d["ty"]))
            if t == "ir.FloatImm":
                v = d["value"]
                return FloatImm(float(v), get(d["ty"]))
            if t in _BIN_CLASSES:
                a, b = get(d["a"]), get(d["b"])
                a, b = _unify(a, b)
                return _BIN_CLASSES[t](a, b)
            if t == "prim.Cast":
                return Cast(get(d["ty"]), get(d["value"]))
            if t == "tirx.IndexMap":
                init, final = get(d["initial_indices"]), get(d["final_indices"])
                inv = get(d.get("inverse_index_map", 0))
                return IndexMap(init, final, inv)
        except (KeyError, TypeError) as e:
            raise IndexMapError(f"index map JSON: malformed {t} node ({e})") from None
        raise IndexMapError(f"index map JSON: unsupported node type {t!r}")

    def node_is_number(i: int) -> bool:
        return 0 <= i < len(nodes) and isinstance(nodes[i], dict) and nodes[i].get("type") == "int"

    result = get(root)
    if not isinstance(result, IndexMap):
        raise IndexMapError("index map JSON: the root node is not an index map")
    return result
