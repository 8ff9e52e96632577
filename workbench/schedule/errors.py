"""Schedule errors: one base class, one subclass per way a primitive can refuse.

Every message names the primitive and the loop/block it refused. A refused
primitive leaves the schedule exactly as it was (primitives are pure functions;
the schedule only swaps in their result on success). ``detail()`` prints the IR
with the offending loops/blocks marked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import PrimFunc, Var


class ScheduleError(Exception):
    """Base class of everything a schedule primitive can refuse.

    Attributes: ``primitive`` (e.g. ``"split"``), ``func`` (the function as it was),
    ``loops`` (loop variables involved) and ``blocks`` (block names involved).
    """

    def __init__(
        self,
        primitive: str,
        message: str,
        func: PrimFunc | None = None,
        loops: Iterable[Var] = (),
        blocks: Iterable[str] = (),
    ):
        self.primitive = primitive
        self.message = message
        self.func = func
        self.loops = tuple(loops)
        self.blocks = tuple(blocks)
        super().__init__(f"{primitive}: {message}")

    def detail(self, syntax: str = "classic") -> str:
        """The error message, then the IR with the offending loops/blocks marked.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> try:
        ...     sch.parallel(k)
        ... except wb.ScheduleError as e:
        ...     err = e
        >>> print(err.detail().splitlines()[0][:47])
        parallel: loop "k" is bound to the reduction it
        >>> "for k in range(16):  # <-- parallel" in err.detail()
        True
        """
        head = str(self)
        if self.func is None:
            return head
        marks: dict[object, str] = {}
        for v in self.loops:
            marks[v] = self.primitive
        for b in self.blocks:
            marks[b] = self.primitive
        return head + "\n\n" + self.func.script(syntax=syntax, marks=marks)

    def html(self, syntax: str = "classic") -> str:
        """The message as a themed banner, then the IR with the marked lines
        (``# <-- primitive``) emphasised — what notebooks and the widgets show."""
        from ..ir.highlight import code_block, error_banner, highlight_lines

        banner = error_banner(str(self), type(self).__name__)
        if self.func is None:
            return f'<div class="wb-error">{banner}</div>'
        text = self.detail(syntax=syntax).split("\n\n", 1)[1]
        lines = highlight_lines(text)
        marker = f"# <-- {self.primitive}"
        for n, raw in enumerate(text.split("\n")):
            if raw.rstrip().endswith(marker):
                lines[n] = (
                    '<span style="display:inline-block;min-width:100%;'
                    'background:rgba(211,47,47,0.22)">' + lines[n] + "</span>"
                )
        return f'<div class="wb-error">{banner}{code_block(lines)}</div>'

    def _repr_html_(self) -> str:
        return self.html()


class InvalidScheduleArgumentError(ScheduleError, ValueError):
    """An argument has the wrong type or value (a handle from another schedule...)."""


class FunctionNotFoundError(ScheduleError, KeyError, ValueError):
    """The module has no function of that name, or several and none was chosen. Also a
    ``ValueError``, as TVM raises there (and a ``KeyError``, a missing name)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class BlockNotFoundError(ScheduleError, KeyError):
    """No block of that name in the function."""

    def __str__(self) -> str:
        return Exception.__str__(self)


class StaleHandleError(ScheduleError):
    """A loop/block handle refers to something an earlier primitive removed."""


class RemovedHandleError(ScheduleError, IndexError):
    """A handle used after ``remove_rv`` dropped it (TVM raises ``IndexError`` too)."""


class InvalidFactorsError(ScheduleError, ValueError):
    """Split factors that are not positive integers, or more than one ``None``."""


class WrongFactorProductError(ScheduleError, ValueError):
    """Split factors whose product is smaller than the loop's extent."""


class BoundLoopError(ScheduleError):
    """The loop is bound to a GPU thread axis and cannot be transformed that way."""


class LoopsNotNestedError(ScheduleError):
    """Loops to fuse are not directly nested one inside the other."""


class LoopsNotInChainError(ScheduleError):
    """Loops to reorder are not on a single chain of nested loops."""


class DuplicateLoopError(ScheduleError, ValueError):
    """The same loop was given twice."""


class LoopNotStartWithZeroError(ScheduleError):
    """The primitive needs a loop that starts at 0 (``loop_partition`` makes loops that
    do not)."""


class NotSingleChildError(ScheduleError):
    """Between the loops there is a statement other than the next loop."""


class NotDataParallelError(ScheduleError):
    """The loop drives a reduction iter var, so it cannot run in parallel/vectorized."""


class AnnotationNotFoundError(ScheduleError, KeyError):
    """``unannotate`` of a key that is not there."""

    def __str__(self) -> str:
        return Exception.__str__(self)


class OnlyLeafError(ScheduleError):
    """Removing the block would leave its enclosing block (scope) empty."""


class TraceError(ScheduleError):
    """A trace could not be loaded or replayed; the message names the step."""
