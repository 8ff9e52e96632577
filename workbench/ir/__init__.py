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
from .buffer import SCOPES, Buffer, BufferRegion, MatchBufferRegion
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
    BufferField,
    BufferLoad,
    Call,
    CallExtern,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IfThenElseExpr,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    OpaqueCall,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
    as_expr,
    call_extern,
    cast,
    const,
    if_then_else,
    let,
)
from .functor import Mutator, iter_exprs, iter_stmts, post_order_visit, substitute
from .index_map import IndexMap, IndexMapError
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
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

__all__ = [name for name in dir() if not name.startswith("_")]
