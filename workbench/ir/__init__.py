"""The IR: immutable expression and statement nodes, printer, rewriters, analyses."""

from .analysis import (
    as_module,
    block_names,
    collect_buffers,
    find_block,
    infer_regions,
    iter_blocks,
    structural_equal,
    structural_hash,
)
from .buffer import SCOPES, Buffer, BufferRegion
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
    as_expr,
    cast,
    const,
)
from .functor import Mutator, iter_exprs, iter_stmts, post_order_visit, substitute
from .printer import expr_to_str, highlight_html
from .simplify import simplify
from .stmt import (
    FOR_KINDS,
    THREAD_TAGS,
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
)

__all__ = [name for name in dir() if not name.startswith("_")]
