"""Block arguments by name, as TVM's Python ``Schedule`` accepts them."""

from __future__ import annotations

import functools
import inspect

from .errors import ScheduleError

__all__ = ["accepts_block_names"]


def accepts_block_names(*params: str):
    """Let ``params`` be given as a block name, as TVM's Python ``Schedule`` does: the
    name becomes ``get_block(name)`` (recorded in the trace, like TVM's). If the
    primitive then refuses, the schedule is restored, that lookup included."""

    def decorate(method):
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            if not any(isinstance(a, str) for a in (*args, *kwargs.values())):
                return method(self, *args, **kwargs)  # no name given: nothing to look up
            bound = signature.bind(self, *args, **kwargs)
            named = [p for p in params if isinstance(bound.arguments.get(p), str)]
            if not named:
                return method(self, *args, **kwargs)
            saved = self.copy()
            try:
                for p in named:
                    bound.arguments[p] = self.get_block(bound.arguments[p])
                return method(*bound.args, **bound.kwargs)
            except ScheduleError:
                self._adopt(saved)
                raise

        return wrapper

    return decorate
