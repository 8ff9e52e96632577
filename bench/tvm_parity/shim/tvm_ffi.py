"""``tvm_ffi``: structural equality and hashing on printed workbench IR."""

from __future__ import annotations

import hashlib
from typing import Any

from tvm._adapt import module_getattr
from tvm._compare import equal, printed


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    return equal(lhs, rhs)


def structural_hash(x: Any, map_free_vars: bool = False) -> int:
    return int(hashlib.sha256(printed(x).encode()).hexdigest()[:15], 16)


__getattr__ = module_getattr(__name__)
