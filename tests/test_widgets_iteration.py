"""The loop-nest picture: visit order model, plot and IterationView."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.ir import Block, Mutator, const
from workbench.search.result import figure_svg
from workbench.widgets.iteration import (
    IterationModel,
    TileLevel,
    plot_iteration_space,
    visit_order,
)
from workbench.widgets.iteration_view import IterationView

N = 16


def mm_sch(n: int = N) -> wb.Schedule:
    return wb.Schedule(wb.workloads.mm_relu(n, n, n))


def first_visits(nest) -> list[tuple[int, int]]:
    """Distinct (y, x) points in order of first appearance in ``nest``."""
    seen: dict[tuple[int, int], None] = {}
    for p in nest:
        seen.setdefault(p, None)
    return list(seen)


def replace_block(func: wb.PrimFunc, name: str, **changes) -> wb.PrimFunc:
    """``func`` with block ``name``'s fields replaced (to build IR no primitive makes)."""

    class Swap(Mutator):
        def visit_block(self, b: Block) -> Block:
            b = super().visit_block(b)
            return replace(b, **changes) if b.name == name else b

    return func.with_body(Swap().visit_stmt(func.body))


# ---------------------------------------------------------------------------
# the model


def test_unscheduled_is_row_major_with_reduction_projected():
    pic = visit_order(wb.workloads.mm_relu(N, N, N), "Y")
    assert (pic.y, pic.x) == ("vi", "vj")
    assert pic.shape == (N, N)
    assert pic.title == "Y: i, j, k"
    expected = [(i, j) for i in range(N) for j in range(N)]
    assert [tuple(p) for p in pic.points_in_order()] == expected
    # the order of first visits, not their ranks: argsort walks rows left to right
    assert np.array_equal(np.argsort(pic.first_visit.ravel()), np.arange(N * N))
    assert np.array_equal(pic.order.ravel(), np.arange(N * N))
    # k (extent 16) is innermost: every point is visited 16 times, 16 iterations apart
    assert (pic.visits == N).all()
    assert np.array_equal(np.diff(pic.first_visit.ravel()), np.full(N * N - 1, N))
    assert pic.x_tiles == () and pic.y_tiles == ()
    assert not pic.predicated


def test_split_reorder_visits_column_tiles_first():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, i, j1)
    pic = visit_order(sch, "Y", x="vj", y="vi")
    nest = ((i, j0 * 4 + j1) for j0 in range(4) for i in range(N) for j1 in range(4)
            for k in range(N))
    assert [tuple(p) for p in pic.points_in_order()] == first_visits(nest)
    assert pic.title == "Y: j_0, i, j_1, k"
    assert pic.x_tiles == (TileLevel("j_0", 4, (4, 8, 12)),)
    assert pic.y_tiles == ()


def test_three_level_split_gives_two_tile_levels_outer_first():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    i0, i1, i2 = sch.split(i, factors=[2, 2, 4])
    sch.reorder(i0, k, j, i1, i2)
    pic = visit_order(sch, "Y")
    assert pic.y_tiles == (TileLevel("i_0", 8, (8,)), TileLevel("i_1", 4, (4, 8, 12)))
    nest = ((a * 8 + b * 4 + c, j) for a in range(2) for k in range(N) for j in range(N)
            for b in range(2) for c in range(4))
    assert [tuple(p) for p in pic.points_in_order()] == first_visits(nest)


def test_predicate_from_non_divisor_split_covers_exactly_the_domain():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 5])  # 4 * 5 = 20 > 16: T.where(j_0 * 5 + j_1 < 16)
    sch.reorder(j0, i, j1)
    assert "T.where" in sch.func.script()
    pic = visit_order(sch, "Y")
    assert pic.predicated
    assert pic.covered.all() and pic.num_points == N * N
    assert (pic.visits == N).all()  # the 4 out-of-range j_1 values are not visits
    assert sorted(pic.order.ravel().tolist()) == list(range(N * N))
    nest = ((i, j0 * 5 + j1) for j0 in range(4) for i in range(N) for j1 in range(5)
            if j0 * 5 + j1 < N)
    assert [tuple(p) for p in pic.points_in_order()] == first_visits(nest)
    assert pic.x_tiles == (TileLevel("j_0", 5, (5, 10, 15)),)


def test_fused_loop_enumerated_through_div_and_mod():
    sch = mm_sch(8)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(j, i)
    sch.fuse(j, i)
    assert "j_i_fused // 8" in sch.func.script()
    pic = visit_order(sch, "Y")
    nest = ((f % 8, f // 8) for f in range(64) for k in range(8))
    assert [tuple(p) for p in pic.points_in_order()] == first_visits(nest)
    assert pic.order[1, 0] == 1  # down the first column first
    assert pic.x_tiles == () and pic.y_tiles == ()  # div/mod of a fused loop is no split
    assert (pic.visits == 8).all()


def test_chosen_axes_and_parallel_loop_in_title():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.parallel(i)
    pic = visit_order(sch, "Y", x="vk", y="vi")
    assert (pic.x, pic.y) == ("vk", "vi")
    assert pic.title == "Y: i (parallel), j, k"
    # j is projected away: each (vi, vk) first seen at j == 0, row-major over (i, k)
    assert np.array_equal(pic.order.ravel(), np.arange(N * N))
    assert (pic.visits == N).all()
    # y alone: x defaults to the first other spatial variable
    assert (visit_order(sch, "Y", y="vj").x, visit_order(sch, "Y", x="vi").y) == ("vi", "vj")


def test_reverse_compute_at_block_sees_outer_loops():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reverse_compute_at(sch.get_block("C"), j0)
    pic = visit_order(sch, "C")
    assert pic.title.startswith("C: i, j_0, ")
    nest = ((i, j0 * 4 + a) for i in range(N) for j0 in range(4) for a in range(4))
    assert [tuple(p) for p in pic.points_in_order()] == first_visits(nest)
    assert [t.size for t in pic.x_tiles] == [4]


def test_nested_block_counts_loops_outside_the_outer_block():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.reorder(i0, j, i1)
    sch.blockize(i1)
    # the inner block "Y" iterates (vi_i, vk_i) over loops i_1, k, inside "Y_o"'s i_0, j
    pic = visit_order(sch, "Y")
    assert pic.title == "Y: i_0, j, i_1, k"
    assert (pic.y, pic.x, pic.shape) == ("vi_i", "vk_i", (4, N))
    assert np.array_equal(pic.order.ravel(), np.arange(4 * N))
    assert (pic.visits == 4 * N).all()  # once per (i_0, j)
    outer = visit_order(sch, "Y_o")
    assert (outer.y, outer.x, outer.shape) == ("vi_o", "vj_o", (4, N))
    # a predicate on the outer block's iter var reaches the inner block's picture
    vi_o = wb.ir.find_block(sch.func, "Y_o").iter_vars[0].var
    func = replace_block(sch.func, "Y", predicate=vi_o < const(2))
    assert (visit_order(func, "Y").visits == 2 * N).all()


def test_single_iter_var_block_is_one_row():
    A = wb.placeholder((12,), "float32", name="A")
    B = wb.compute((12,), lambda i: A[i] * 2.0, name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="double"))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 3])
    pic = visit_order(sch, "B")
    assert pic.shape == (1, 12) and pic.y is None and pic.x == "vi"
    assert pic.order.tolist() == [list(range(12))]
    assert [t.boundaries for t in pic.x_tiles] == [(3, 6, 9)]


def test_bad_arguments_name_the_block_or_axis():
    func = wb.workloads.mm_relu(N, N, N)
    with pytest.raises(ValueError, match='no block "Z".*Y, C'):
        visit_order(func, "Z")
    with pytest.raises(ValueError, match='block "Y" has no iteration variable "vz"'):
        visit_order(func, "Y", x="vz")
    with pytest.raises(ValueError, match='x and y are both "vi"'):
        visit_order(func, "Y", x="vi", y="vi")
    with pytest.raises(TypeError, match="Schedule, PrimFunc or IRModule"):
        visit_order("mm_relu", "Y")


def test_unsupported_binding_names_the_expression():
    func = wb.workloads.mm_relu(4, 4, 4)
    blk = wb.ir.find_block(func, "C")
    vi = blk.iter_vars[0]
    bad = replace_block(func, "C", iter_values=(wb.ir.Cast("int32", wb.sqrt(
        wb.ir.Cast("float32", blk.iter_values[0]))), blk.iter_values[1]))
    with pytest.raises(ValueError, match=r'block "C".*T\.sqrt.*not integer index'):
        visit_order(bad, "C")
    # a binding that leaves the iter var's domain is reported, not silently dropped
    off = replace_block(func, "C", iter_values=(blk.iter_values[0] + 1, blk.iter_values[1]))
    with pytest.raises(ValueError, match=f"{vi.var.name} = .* reaches 4, outside"):
        visit_order(off, "C")
    # and a predicate written by hand excludes points
    half = replace_block(func, "C", predicate=blk.iter_values[0] < const(2))
    assert visit_order(half, "C").covered.sum() == 8


def test_first_visit_wins_and_unvisited_points_are_marked():
    func = wb.workloads.mm_relu(4, 4, 4)
    blk = wb.ir.find_block(func, "C")
    # vi = i % 2: rows 0 and 1 are each visited twice (i = 0, 2 and i = 1, 3), rows 2
    # and 3 never
    folded = replace_block(func, "C", iter_values=(blk.iter_values[0] % 2, blk.iter_values[1]))
    pic = visit_order(folded, "C")
    assert pic.first_visit.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [-1] * 4, [-1] * 4]
    assert pic.visits.tolist() == [[2] * 4, [2] * 4, [0] * 4, [0] * 4]
    assert pic.num_points == 8 and not pic.covered[2:].any()
    assert (pic.order[2:] == -1).all()


def test_large_nest_is_vectorized():
    sch = mm_sch(128)
    sch.fuse(*sch.get_loops(sch.get_block("Y")))  # 2M iterations of one loop, all enumerated
    start = time.perf_counter()
    pic = visit_order(sch, "Y")
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"128^3 picture took {elapsed:.2f} s"
    assert pic.shape == (128, 128) and (pic.visits == 128).all()
    assert np.array_equal(pic.order.ravel(), np.arange(128 * 128))


# ---------------------------------------------------------------------------
# the plot


def test_plot_title_colorbar_tiles_and_numbers():
    sch = mm_sch()
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1, j2 = sch.split(j, factors=[2, 2, 4])
    sch.reorder(i, j0, k, j1, j2)
    fig = plot_iteration_space(sch, "Y")
    ax, bar_ax = fig.axes
    assert ax.get_title() == "Y: i, j_0, k, j_1, j_2"
    assert bar_ax.get_xlabel() == "visit order"
    assert ax.get_xlabel() == "vj (extent 16)" and ax.get_ylabel() == "vi (extent 16)"
    numbers = [t.get_text() for t in ax.texts if t.get_text()]  # arrows have no text
    assert sorted(numbers, key=int) == [str(n) for n in range(N * N)]
    # one line collection per tile level: the outer one (every 8) is thicker
    lines = [c for c in ax.collections if len(c.get_segments())]
    xs = [sorted({seg[0][0] + 0.5 for seg in c.get_segments()}) for c in lines]
    assert xs == [[8.0], [4.0, 8.0, 12.0]]
    assert lines[0].get_linewidth()[0] > lines[1].get_linewidth()[0]


def test_plot_shown_fraction_greys_the_rest_and_draws_into_given_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    out = plot_iteration_space(wb.workloads.mm_relu(N, N, N), "Y", ax=ax, shown=0.25)
    assert out is fig
    assert ax.get_title() == "Y: i, j, k\nfirst 64 of 256 points shown"
    assert len([t for t in ax.texts if t.get_text()]) == 64  # only shown points numbered
    rgba = ax.images[0].get_array()
    grey = rgba[8, 0]  # row 8 is visited after the first quarter
    assert np.allclose(grey[:3], grey[0]) and not np.allclose(rgba[0, 0], grey)
    with pytest.raises(ValueError, match="between 0 and 1"):
        plot_iteration_space(wb.workloads.mm_relu(4, 4, 4), "Y", shown=2)


def test_plot_large_grid_has_no_numbers_and_svg_is_stable():
    func = wb.workloads.mm_relu(64, 64, 8)
    fig = plot_iteration_space(func, "Y")
    assert len(fig.axes[0].texts) == 0
    svg = figure_svg(fig)
    assert svg.startswith("<svg") and "Y: i, j, k" in svg
    assert figure_svg(plot_iteration_space(func, "Y")) == svg


# ---------------------------------------------------------------------------
# the view


def test_view_renders_svg_and_axis_dropdown_redraws():
    sch = mm_sch(8)
    view = IterationView(sch, "Y")
    assert "<svg" in view.html.value and "Y: i, j, k" in view.html.value
    assert view.block_dropdown.options == ("Y", "C")
    assert (view.x_dropdown.value, view.y_dropdown.value) == ("vj", "vi")
    before = view.html.value
    view.x_dropdown.value = "vk"
    assert (view.model.x, view.model.y) == ("vk", "vi")
    assert view.html.value != before and "vk (extent 8)" in view.html.value
    view.y_dropdown.value = "vk"  # taking x's axis swaps the two
    assert (view.x_dropdown.value, view.y_dropdown.value) == ("vi", "vk")


def test_view_slider_shows_first_visits():
    view = IterationView(mm_sch(8), "Y")
    view.shown_slider.value = 50
    assert view.model.shown == 0.5
    assert "first 32 of 64 points shown" in view.html.value


def test_view_update_redraws_and_keeps_axes():
    sch = mm_sch(8)
    view = IterationView(sch, "Y", x="vk", y="vi")
    before = view.html.value
    i, j, k = sch.get_loops(sch.get_block("Y"))
    k0, k1 = sch.split(k, factors=[None, 4])
    view.update(sch)
    assert view.html.value != before
    assert "Y: i, j, k_0, k_1" in view.html.value
    assert (view.x_dropdown.value, view.y_dropdown.value) == ("vk", "vi")
    assert [t.size for t in view.model.picture.x_tiles] == [4]


def test_view_shows_missing_block_as_message_and_recovers():
    sch = mm_sch(8)
    view = IterationView(sch, "Y", x="vk", y="vi")
    blk = sch.get_block("Y")
    sch.decompose_reduction(blk, sch.get_loops(blk)[2])
    view.update(sch)  # must not raise
    assert view.error is not None and '"Y"' in view.error
    assert "<svg" not in view.html.value and "is not in mm_relu any more" in view.html.value
    assert view.block_dropdown.value is None
    assert view.block_dropdown.options == ("Y_init", "Y_update", "C")
    view.block_dropdown.value = "Y_update"
    assert view.error is None and "<svg" in view.html.value
    assert (view.model.x, view.model.y) == ("vk", "vi")  # kept: Y_update has them too


def test_view_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match='"nope"'):
        IterationView(mm_sch(8), "nope")
    with pytest.raises(ValueError, match='"vq"'):
        IterationView(mm_sch(8), "Y", x="vq")


def test_view_single_block_hides_block_menu():
    A = wb.placeholder((6, 4), "float32", name="A")
    B = wb.compute((6, 4), lambda i, j: A[i, j] + 1.0, name="B")
    view = IterationView(wb.create_prim_func([A, B], name="inc"))
    assert view.model.block == "B"
    assert view.block_dropdown.layout.display == "none"
    assert "<svg" in view.html.value


def test_model_without_widgets():
    model = IterationModel(mm_sch(8), "C")
    assert model.picture is not None and model.picture.block == "C"
    model.set_axes("vi", "vj")
    assert model.picture.order[1, 0] == 1  # rows are now vj: column-major walk
    model.update("not a schedule")
    assert model.error is not None and "Schedule, PrimFunc or IRModule" in model.error
    assert model.picture is None
