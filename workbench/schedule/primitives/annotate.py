"""Annotations on loops and blocks: ``annotate`` and ``unannotate``.

Annotations are key/value hints for later passes and code generators, e.g.
``pragma_auto_unroll_max_step`` on a loop. They print as
``annotations={...}`` on loops and ``T.block_attr({...})`` on blocks.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ...ir import Block, For, PrimFunc, Var
from ..errors import AnnotationNotFoundError, InvalidScheduleArgumentError
from ._common import find_block_path, find_loop_path, replace_path

AnnValue = int | float | str | bool | list | dict


def _target(func: PrimFunc, primitive: str, target: Var | str):
    if isinstance(target, Var):
        path = find_loop_path(func, primitive, target)
        return path, path[-1], {"loops": [target]}
    path = find_block_path(func, primitive, target)
    return path, path[-1], {"blocks": [target]}


def _describe(node: For | Block) -> str:
    return f'loop "{node.loop_var.name}"' if isinstance(node, For) else f'block "{node.name}"'


def _bad_value(value: Any, depth: int = 0, in_dict: bool = False) -> str | None:
    """What is wrong with an annotation value, or None. As TVM's ``annotate``: a
    scalar, a list of scalars, or a dict with string keys whose values are scalars or
    lists of scalars."""
    if isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"got {value!r}"
    if isinstance(value, (list, tuple)) and depth == 0:
        for x in value:
            bad = _bad_value(x, 1)
            if bad:
                return bad
        return None
    if isinstance(value, dict) and depth == 0 and not in_dict:
        for k, v in value.items():
            if not isinstance(k, str):
                return f"dict keys must be strings, got {k!r}"
            bad = _bad_value(v, 0, in_dict=True)
            if bad:
                return bad
        return None
    return f"got {type(value).__name__} {value!r}"


def freeze_value(value: Any) -> Any:
    """The stored form of an annotation value: lists become tuples, a dict is copied
    (keys in the order given; printers sort them, as TVM does)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze_value(x) for x in value)
    if isinstance(value, dict):
        return {k: freeze_value(v) for k, v in value.items()}
    return value


def annotate(func: PrimFunc, target: Var | str, key: str, value: Any) -> PrimFunc:
    """Set annotation ``key`` to ``value`` on a loop (by var) or a block (by name).

    As in TVM, a key the loop or block already has keeps its value: annotating it again
    changes nothing (``unannotate`` it first to change the value). An annotated loop can
    no longer be split or fused (TVM's rule); reorder and the loop kinds keep it.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.annotate import annotate
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> i = func.body.body.loop_var
    >>> once = annotate(func, i, "pragma_auto_unroll_max_step", 16)
    >>> twice = annotate(once, i, "pragma_auto_unroll_max_step", 64)
    >>> twice is once, twice.body.body.annotations
    (True, (('pragma_auto_unroll_max_step', 16),))
    """
    path, node, where = _target(func, "annotate", target)
    if not isinstance(key, str) or not key:
        raise InvalidScheduleArgumentError(
            "annotate",
            f"ann_key must be a non-empty string, got {key!r} for {_describe(node)}",
            func,
            **where,
        )
    problem = _bad_value(value)
    if problem:
        raise InvalidScheduleArgumentError(
            "annotate",
            f"ann_val for {_describe(node)} must be a finite int/float, a str, a bool, a "
            f"list of those or a dict of str to those or lists of those; {problem}",
            func,
            **where,
        )
    if any(k == key for k, _ in node.annotations):
        return func  # TVM keeps an existing annotation
    anns = node.annotations + ((key, freeze_value(value)),)
    return replace_path(func, path, replace(node, annotations=anns))


def unannotate(func: PrimFunc, target: Var | str, key: str) -> PrimFunc:
    """Remove annotation ``key`` from a loop or block."""
    path, node, where = _target(func, "unannotate", target)
    if not any(k == key for k, _ in node.annotations):
        have = [k for k, _ in node.annotations]
        raise AnnotationNotFoundError(
            "unannotate",
            f'{_describe(node)} has no annotation "{key}" (it has {have})',
            func,
            **where,
        )
    anns = tuple((k, v) for k, v in node.annotations if k != key)
    return replace_path(func, path, replace(node, annotations=anns))
