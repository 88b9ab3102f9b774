"""One spike convention and one colour per phase in every figure
(empirical.report.phase_marks), and plain-language legend names
(empirical.runs.names)."""

import matplotlib.pyplot as plt
import pytest

from empirical.report.phase_marks import PHASE_COLORS, draw_phase_marks, phase_mark_list
from empirical.runs.names import legend_label, measure_label, set_label
from empirical.runs.phases import Phases, Rise


def phases() -> Phases:
    first = Rise(4501, 6001, 0.6, 5401, jump_start_step=5301, jump_end_step=5401)
    second = Rise(14301, 16001, 0.25, 15201, jump_start_step=15101, jump_end_step=15201)
    return Phases(801, first, second, "variables", "restricted")


def test_marks_are_the_jumps_not_the_windows_for_objects_and_summary_dicts():
    for given in (phases(), phases().to_dict()):
        marks = phase_mark_list(given)
        assert [(m.key, m.start, m.end) for m in marks] == [
            ("zero_var", 801, 801),
            ("first_spike", 5301, 5401),
            ("second_spike", 15101, 15201),
        ]
        assert [m.color for m in marks] == [PHASE_COLORS[m.key] for m in marks]
        assert marks[1].label == "first spike (variables routed): step 5 301 -> 5 401"
        assert marks[0].label.endswith("step 801")
    assert phase_mark_list(None) == []
    no_second = phases().to_dict() | {"second_spike": None}
    assert [m.key for m in phase_mark_list(no_second)] == ["zero_var", "first_spike"]


def test_every_figure_module_draws_the_same_marks():
    from empirical.bridge.compare_qk.plots import phase_marks as compare_qk_marks
    from empirical.report.style import phase_marks as analysis_marks

    drawn = []
    for draw in (draw_phase_marks, analysis_marks, compare_qk_marks):
        fig, ax = plt.subplots()
        draw(ax, phases().to_dict())
        lines = [(tuple(line.get_xdata()), line.get_color()) for line in ax.get_lines()]
        drawn.append((lines, ax.get_legend_handles_labels()[1]))
        plt.close(fig)
    assert drawn[0] == drawn[1] == drawn[2]
    lines, labels = drawn[0]
    assert [x[0] for x, _ in lines] == [801, 5401, 15201]
    assert labels[2] == "second spike (untrained positions): step 15 101 -> 15 201"


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("0var/ind", "0 variables: trained value pairs"),
        ("2var/var", "2 variables, one at a position it never held in training"),
        ("curated/novel_orderings", "curated: novel assignment orderings"),
        ("chain/2var_h3", "chain: 2 variables, 3 hops"),
        ("chain/1var_h1", "chain: 1 variable, 1 hop"),
        ("fig3/2var_union", "fig3/2var_union"),  # no plain form: the name itself
    ],
)
def test_set_names(name, plain):
    assert set_label(name) == plain
    assert legend_label(name) == (name if plain == name else f"{plain} [{name}]")


def test_measure_names_keep_the_code_name_and_the_authors_suffix():
    assert measure_label("qk1_num_to_prev_var") == (
        "layer-1 QK: number -> previous variable [qk1_num_to_prev_var]"
    )
    assert measure_label("attn_l2_equal_to_values@authors").startswith(
        "layer-2 attention: `=` -> operand values (authors)"
    )
    assert measure_label("unknown_measure") == "unknown_measure"


def test_set_timeline_counts_separate_rises_by_their_jumps():
    from empirical.runs.set_timeline import format_timeline, set_timeline

    def level(step):  # two rises: 0.1 -> 0.5 at 1 000 -> 1 100, 0.5 -> 1.0 at 5 000 -> 5 100
        return 0.1 + 0.4 * (step >= 1100) + 0.5 * (step >= 5100)

    records = [{"step": s, "acc": {"chain/1var_h2": level(s), "flat": 0.5}}
               for s in range(0, 8001, 100)]  # fmt: skip
    t = set_timeline(records)
    rises = t["chain/1var_h2"]["spikes"]
    assert [(r["jump_start_step"], r["jump_end_step"]) for r in rises] == [
        (1000, 1100), (5000, 5100)
    ]
    assert t["chain/1var_h2"]["first_90"] == t["chain/1var_h2"]["first_99"] == 5100
    assert t["flat"]["spikes"] == [] and t["flat"]["first_90"] is None
    table = "\n".join(format_timeline(t))
    assert "| chain/1var_h2 | 5 100 | 5 100 | 100.0% | 1 000 -> 1 100 (+40 points); 5 000" in table
    assert "| flat | not reached | not reached | 50.0% | none |" in table


def test_progress_figure_of_a_run_without_accuracy_says_so():
    from types import SimpleNamespace

    from empirical.analysis.plots.over_training import plot_progress

    history = SimpleNamespace(steps=[0, 100], measures={"qk1_num_to_prev_var": [0.1, 0.95]},
                              crossings={})  # fmt: skip
    fig = plot_progress(history, [], None)
    texts = [t.get_text() for t in fig.axes[-1].texts]
    assert any("no accuracy recorded" in t and "--all-steps" in t for t in texts)
    plt.close(fig)
