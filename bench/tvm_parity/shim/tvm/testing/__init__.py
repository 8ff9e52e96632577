"""``tvm.testing``: the pytest utilities TVM's test files use."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from .._adapt import module_getattr
from .._compare import assert_equal


def parameter(*values: Any, ids: Any = None, by_dict: dict | None = None) -> Any:
    """A fixture taking each value in turn; its name is the variable it is assigned to
    (``use_block_name = tvm.testing.parameter(...)``), as in TVM."""
    if by_dict is not None:
        ids, values = list(by_dict), tuple(by_dict.values())

    @pytest.fixture(params=values, ids=ids)
    def as_fixture(*_cls: Any, request: Any) -> Any:
        return request.param

    return as_fixture


def parameters(*value_sets: Any, ids: Any = None) -> tuple:
    """Several fixtures that take their values together (one tuple per case)."""
    columns = list(zip(*value_sets))

    @pytest.fixture(params=value_sets, ids=ids)
    def combined(request: Any) -> Any:
        return request.param

    fixtures = []
    for i in range(len(columns)):
        @pytest.fixture
        def column(combined: Any, i: int = i) -> Any:
            return combined[i]

        fixtures.append(column)
    return (combined, *fixtures)


def fixture(func: Any = None, **kwargs: Any) -> Any:
    kwargs.pop("cache_return_value", None)
    return pytest.fixture(func, **kwargs) if func is not None else pytest.fixture(**kwargs)


def main() -> None:
    sys.exit(pytest.main([sys.argv[0], *sys.argv[1:]]))


def assert_structural_equal(lhs: Any, rhs: Any, *args: Any, **kwargs: Any) -> None:
    assert_equal(lhs, rhs)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0) -> None:
    import numpy as np

    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


__getattr__ = module_getattr(__name__)
