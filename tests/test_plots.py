"""``kbagent report``'s plots, read back from the matplotlib figures: task names as pytest ids,
fast_p against p, integer phase ticks, and a cost plot that says so when no call had a price."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("matplotlib")

from kbagent import plots  # noqa: E402
from pytest_kernelbench.report.summary import fast_p  # noqa: E402


def make_run(tmp_path, level, name, best, phases, costs=(), calls=4):
    """A run folder as the search writes it (summary.json and tree.json), read back with load_run."""
    folder = tmp_path / f"L{level}-{name}"
    folder.mkdir()
    tree = [{"id": f"p0-i{i}", "seq": i + 1, "cost_usd": costs[i] if i < len(costs) else 0.0, "outcome": "incorrect"}
            for i in range(calls)]  # fmt: skip
    if best and best.get("outcome") == "correct":
        tree[-1].update(outcome="correct", speedup=best["speedup"])
    summary = {
        "problem": {"id": f"L{level}-{name}", "level": level, "problem_id": int(name.split("_")[0]), "name": name},
        "best": best,
        "phases": [{"phase": i, "best_so_far": v} for i, v in enumerate(phases)],
        "llm_calls": calls,
        "cost_usd": sum(costs),
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "tree.json").write_text(json.dumps({"nodes": tree}))
    return plots.load_run(folder)


@pytest.fixture
def runs(tmp_path):
    return [
        make_run(tmp_path, "1", "19_ReLU", {"outcome": "correct", "speedup": 2.5, "node": "p2-i0"}, [None, 1.5, 2.5]),
        make_run(tmp_path, "1", "23_Softmax", {"outcome": "correct", "speedup": 0.8, "node": "p0-i1"}, [0.8, 0.8, 0.8]),
        make_run(tmp_path, "mini", "3_Softmax", {"outcome": "incorrect", "speedup": None, "node": "p0-i0"}, [None, None, None]),
    ]


@pytest.fixture
def figs(runs):
    import matplotlib.pyplot as plt

    made = plots.figures(runs)
    yield made
    for fig in made.values():
        plt.close(fig)


def test_tasks_are_named_as_pytest_ids(tmp_path, runs, figs):
    from pytest_kernelbench.problems import Problem

    names = ["L1-19_ReLU", "L1-23_Softmax", "Lmini-3_Softmax"]
    assert [run.task for run in runs] == names
    assert Problem("1", 19, "19_ReLU", "").id == names[0]  # the plugin's item id
    for name in ("speedup_per_phase.png", "speedup_vs_calls.png"):
        labels = [line.get_label() for line in figs[name].axes[0].get_lines() if not line.get_label().startswith("_")]
        assert labels[:3] == names, name
    assert "L1-19_ReLU" in plots.table(runs)
    # a summary with no id (written before it had one) is named the same way
    old = plots.Run(tmp_path, {"problem": {"level": "2", "name": "7_Gemm"}}, [])
    assert old.task == "L2-7_Gemm"


def test_fast_p_is_kernelbench_fast_p_over_all_tasks(runs, figs):
    ps = [0.0, 0.5, 0.8, 1.0, 2.0, 2.5, 3.0]
    curve = plots.fast_p_curve(runs, ps)
    assert curve == [(0.0, pytest.approx(2 / 3)), (0.5, pytest.approx(2 / 3)), (0.8, pytest.approx(1 / 3)),
                     (1.0, pytest.approx(1 / 3)), (2.0, pytest.approx(1 / 3)), (2.5, 0.0), (3.0, 0.0)]  # fmt: skip
    results = [SimpleNamespace(correct=r.best_speedup is not None, speedup=r.best_speedup) for r in runs]
    assert [f for _, f in curve] == pytest.approx([fast_p(results, p) for p in ps])  # the judge's own fast_p

    # the default grid: every step, and a point past the largest speedup; the figure draws exactly it
    default = plots.fast_p_curve(runs)
    assert [p for p, _ in default] == pytest.approx([0.0, 0.8, 1.0, 2.5, 3.0])
    assert [f for _, f in default] == pytest.approx([2 / 3, 1 / 3, 1 / 3, 0.0, 0.0])
    ax = figs["fast_p.png"].axes[0]
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == pytest.approx([p for p, _ in default])
    assert list(line.get_ydata()) == pytest.approx([f for _, f in default])
    assert line.get_drawstyle() == "steps-post"
    assert "fast_0 0.67" in ax.get_title() and "fast_1 0.33" in ax.get_title() and "3 tasks" in ax.get_title()


def test_fast_p_counts_a_noisy_best_only_as_far_as_its_interval_goes(tmp_path):
    """As the judge's fast_p: a best of 1.8x whose 95% interval is 0.9-3.6 is not a gain over 1."""
    noisy = make_run(tmp_path, "1", "19_ReLU", {"outcome": "correct", "speedup": 1.8, "speedup_noisy": True,
                                                "speedup_interval": [0.9, 3.6]}, [1.8])  # fmt: skip
    steady = make_run(tmp_path, "1", "20_LeakyReLU", {"outcome": "correct", "speedup": 1.8, "speedup_noisy": False,
                                                      "speedup_interval": [1.7, 1.9]}, [1.8])  # fmt: skip
    ps = [0.0, 0.85, 1.0, 1.5, 2.0]
    curve = plots.fast_p_curve([noisy, steady], ps)
    assert [f for _, f in curve] == [1.0, 1.0, 0.5, 0.5, 0.0]
    results = []
    for run in (noisy, steady):
        best = run.summary["best"]
        results.append(SimpleNamespace(correct=True, speedup=best["speedup"], extra=best))
    assert [f for _, f in curve] == [fast_p(results, p) for p in ps]  # the judge's own fast_p
    assert noisy.best_speedup == 1.8 and noisy.best_claim == 0.9 and steady.best_claim == 1.8


def test_phase_axes_have_integer_ticks(tmp_path, runs, figs):
    import matplotlib.pyplot as plt

    for name in ("speedup_per_phase.png", "geomean_vs_phase.png"):
        assert list(figs[name].axes[0].get_xticks()) == [0, 1, 2], name
    calls = figs["speedup_vs_calls.png"].axes[0].get_xticks()
    assert list(calls) == [1, 2, 3, 4]
    # one phase only: matplotlib would tick -0.04 ... 0.04
    single = make_run(tmp_path, "1", "5_One", {"outcome": "correct", "speedup": 1.2}, [1.2])
    made = plots.figures([single])
    try:
        for name in ("speedup_per_phase.png", "geomean_vs_phase.png"):
            assert list(made[name].axes[0].get_xticks()) == [0], name
    finally:
        for fig in made.values():
            plt.close(fig)


def test_cost_plot_says_when_no_call_had_a_price(runs, figs):
    ax = figs["speedup_vs_cost.png"].axes[0]
    assert "no LLM call had a price" in ax.get_title()
    assert ax.get_lines() == []  # no line at $0
    assert any("--price-in/--price-out" in text.get_text() for text in ax.texts)


def test_cost_plot_draws_dollars_when_calls_had_a_price(tmp_path):
    import matplotlib.pyplot as plt

    priced = make_run(tmp_path, "1", "19_ReLU", {"outcome": "correct", "speedup": 2.0}, [2.0], costs=(0.01, 0.02, 0.0, 0.03))
    free = make_run(tmp_path, "1", "20_Free", {"outcome": "correct", "speedup": 1.5}, [1.5])
    assert priced.priced and not free.priced
    made = plots.figures([priced, free])
    try:
        ax = made["speedup_vs_cost.png"].axes[0]
        assert "price" not in ax.get_title() and not ax.texts
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert list(lines["L1-19_ReLU"].get_xdata()) == pytest.approx([0.01, 0.03, 0.03, 0.06])
    finally:
        for fig in made.values():
            plt.close(fig)


def test_draw_writes_every_figure(tmp_path, runs):
    written = plots.draw(runs, tmp_path / "plots")
    names = ["fast_p.png", "geomean_vs_phase.png", "speedup_per_phase.png", "speedup_vs_calls.png", "speedup_vs_cost.png"]
    assert sorted(p.name for p in written) == names
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_a_small_noisy_move_is_drawn_on_an_axis_that_does_not_magnify_it(tmp_path):
    import matplotlib.pyplot as plt

    run = make_run(tmp_path, "1", "19_ReLU", {"outcome": "correct", "speedup": 1.026, "node": "p1-i0"}, [1.0, 1.026])
    made = plots.figures([run])
    try:
        for name in ("speedup_per_phase.png", "geomean_vs_phase.png", "speedup_vs_calls.png"):
            low, high = made[name].axes[0].get_ylim()
            assert low < 1.0 < 1.026 < high and high / low >= plots.MIN_SPEEDUP_SPAN, (name, low, high)
        assert "(1 task)" in made["geomean_vs_phase.png"].axes[0].get_title()
    finally:
        for fig in made.values():
            plt.close(fig)


def test_the_table_gives_the_geomean_over_the_correct_ones_as_pytest_does(runs):
    text = plots.table(runs)
    over_correct = (2.5 * 0.8) ** 0.5  # pytest's summary: correct results only
    with_failures = (2.5 * 0.8 * 1.0) ** (1 / 3)  # the task with no correct candidate as 1.0
    assert f"3 tasks, 2 correct; geomean speedup of the best candidates: {over_correct:.3f} over the correct ones" in text
    assert f"{with_failures:.3f} with no correct one counted as 1.0" in text
