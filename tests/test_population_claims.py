"""`python -m empirical claims --summarize` on a synthetic population whose statistics are
known (tests/population_fixture.py): exact counts, intervals, jumps, robust final accuracy and
collapses; a comparison of two variants; the bad inputs (empty population, members of
different configs mixed, a member without metrics) as one error line, exit status 2."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from population_fixture import grid_config, write_member, write_population

from empirical.cli.claims import main
from empirical.report.population_stats import share_interval


def claims_of(out, variant="ours") -> dict:
    return json.loads((out / "claims" / variant / "claims.json").read_text())


def summarize(config, out, *extra) -> int:
    return main(["--config", str(config), "--out", str(out), "--summarize", "--no-analysis",
                 *extra])  # fmt: skip


def entry(claims: dict, claim: str) -> dict:
    return next(c for c in claims["claims"] if c["claim"] == claim)


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("population")
    config, out = write_population(tmp)
    assert summarize(config, out) == 0
    return config, out, claims_of(out)


def test_required_fields_and_members(population):
    _, out, c = population
    assert c["members"] == 4 and c["member_names"] == [f"ours_seed{s}" for s in range(4)]
    assert c["config"] == "synthetic.ours" and c["device"] == "CPU (synthetic)"
    assert c["torch"] and "commit" in c and c["not_counted"] == []
    assert c["not_analysed"] == {f"ours_seed{s}": "no analysis.json" for s in range(4)}
    for name in ("claims.md", "jumps.png", "survival.png", "final.png", "theory.png"):
        assert (out / "claims" / "ours" / name).stat().st_size > 0


def test_exact_counts_and_intervals_at_the_last_step(population):
    c = population[2]
    one = entry(c, "> 99% on every 1var set (Fig. 2)")  # seeds 0 and 2 (seed 1: 0.90 at 4 000)
    assert one["outcomes"] == ["yes", "no", "yes", "no"]
    assert (one["holds"], one["of"], one["share"]) == (2, 4, 0.5)
    assert one["ci95"] == pytest.approx([0.150036, 0.849964], abs=1e-5)
    assert one["verdict"] == "seed-dependent"
    assert one["values"] == [1.0, 0.9, 1.0, 0.6]  # the lowest 1var set of each member
    zero = entry(c, "> 99% on every 0var set (Fig. 2)")
    assert (zero["holds"], zero["of"], zero["verdict"]) == (4, 4, "holds")
    assert zero["ci95"] == pytest.approx(list(share_interval(4, 4)))
    # the jumps are at 1 000 and 2 000, not the paper's steps: the spike claim is two, its
    # presence (3 of 4 have it) and its timing (none at the paper's steps)
    present = entry(c, "first spike: variable routing, present")
    assert present["outcomes"] == ["yes", "yes", "yes", "no"]
    assert (present["holds"], present["verdict"], present["lean"]) == (3, "seed-dependent",
                                                                      "towards holds")
    timing = entry(c, "first spike: variable routing, at the paper's steps")
    assert timing["outcomes"] == ["no", "no", "no", "no"]
    assert (timing["holds"], timing["verdict"], timing["lean"]) == (0, "fails", None)
    assert all(x["claim"] != "first spike: variable routing" for x in c["claims"])
    assert one["lean"] == "even"
    # analysis claims are not measured without analysis.json (left out, not counted as no)
    assert all(x["claim"] != "isolated OV-MLP adds all pairs" for x in c["claims"])


def test_robust_final_accuracy(population):
    c = population[2]
    # (2 000, 4 000] holds 20 evaluations: seed1 19 x 1.0 + 0.90, seed2 19 x 1.0 + 0.50
    assert c["final"]["1var/var"] == pytest.approx([1.0, 0.995, 0.975, 0.6])
    assert c["final_last"]["1var/var"] == [1.0, 0.9, 1.0, 0.6]
    assert c["final_stats"]["1var/var"]["n_evals"] == [20, 20, 20, 20]
    robust = entry(c, "> 99% on every 1var set (Fig. 2), robust final")
    assert robust["outcomes"] == ["yes", "yes", "no", "no"] and robust["kind"] == "robust"
    stats = c["final_stats"]["1var/var"]
    assert stats["robust"]["mean"] == pytest.approx((1.0 + 0.995 + 0.975 + 0.6) / 4)
    assert stats["robust"]["resampled"] == "members and evaluation sequences"
    lo, hi = stats["robust"]["ci95"]
    assert 0.6 <= lo < stats["robust"]["mean"] < hi <= 1.0
    assert (stats["robust_at_least_99"]["holds"], stats["last_at_least_99"]["holds"]) == (2, 2)


def test_jumps_and_survival(population):
    j = population[2]["jumps"]
    assert j["first"] == [1000, 1000, 1000, None] and j["second"] == [2000, 2000, None, None]
    assert (j["first_without"], j["second_without"]) == (1, 2)
    assert j["paper"] is None  # no paper's run placed: its jumps are read from that run
    assert j["first_survival"]["steps"][0] == 1000
    assert j["first_survival"]["survival"][0] == pytest.approx(0.25)
    assert j["first_survival"]["censored"] == [4000]
    assert j["second_survival"]["median"] == 2000
    assert j["first_summary"]["mean"] == 1000 and j["first_summary"]["n"] == 3


def test_late_collapses(population):
    col = population[2]["collapses"]
    var = col["by_set"]["1var/var"]
    assert var["members"] == ["ours_seed1", "ours_seed2"] and (var["holds"], var["of"]) == (2, 4)
    events = {e["member"]: e for e in col["events"]}
    assert events["ours_seed1"] | {} == {"member": "ours_seed1", "set": "1var/var",
                                         "reached_step": 1000, "collapse_step": 4000,
                                         "lowest": 0.9, "recovered_step": None}  # fmt: skip
    assert (events["ours_seed2"]["collapse_step"], events["ours_seed2"]["recovered_step"]) == (
        3000, 3100)
    assert events["ours_seed2"]["lowest"] == 0.5
    assert col["by_set"]["0var/ind"]["holds"] == 0


def test_claims_markdown_states_the_rule_and_the_verdicts(population):
    md = (population[1] / "claims" / "ours" / "claims.md").read_text()
    assert "**Verdict rule.**" in md and "Wilson 95% interval" in md
    assert "| > 99% on every 1var set (Fig. 2) | > 99% | 2 of 4 | 50.0% [15.0, 85.0] | " \
           "**seed-dependent, 2 of 4** |" in md  # fmt: skip
    assert "| 1var/var | 2 of 4 (ours_seed1, ours_seed2) |" in md


def test_the_same_files_give_the_same_claims(population, tmp_path):
    config, out, c = population
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert summarize(config, copy, "--no-figures") == 0
    again = claims_of(copy)
    assert again == c


def test_two_variants_are_compared(tmp_path):
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    config = grid_config(tmp_path)
    config.write_text(config.read_text() + 'late = ["train.lr=0.002"]\n')
    base, spec = load_grid_config(config)
    out = tmp_path / "pop"
    late = {s: 3000 for s in range(4)}
    for m in expand_grid(base, spec):
        first = late if m.value == "late" else None
        kwargs = {"first": first} if first else {}
        write_member(out / "members" / m.dirname, m.cfg, m.seed, **kwargs)
    assert summarize(config, out, "--no-figures") == 0
    cmp = json.loads((out / "claims" / "comparison" / "comparison.json").read_text())
    pair = cmp["pairs"][0]
    assert (pair["a"], pair["b"]) == ("ours", "late")
    first = pair["jumps"]["first"]
    assert first["events"] == [3, 4] and first["n"] == [4, 4]
    # by hand: at 1 000, 8 at risk (4 + 4), 3 jumps, all ours: O - E = 3 - 1.5, V = 3 (1/2)
    # (1/2) (5/7); at 3 000, 1 + 4 at risk, 4 jumps, all late: O - E = -0.8, V = 4 (1/5) (4/5)
    # (1/4); z = (1.5 - 0.8) / sqrt(V)
    from scipy.stats import mannwhitneyu, norm

    z = 0.7 / math.sqrt(3 * 0.25 * 5 / 7 + 4 * 0.2 * 0.8 * 0.25)
    assert first["pvalue"] == pytest.approx(2 * norm.sf(z), rel=1e-6)
    row = next(r for r in pair["claims"] if r["claim"] == "> 99% on every 1var set (Fig. 2)")
    assert row["a"] == [2, 4] and row["b"] == [2, 4] and row["fisher_p"] == pytest.approx(1.0)
    # per set: the robust final accuracies' means, shares at >= 90% and Mann-Whitney U
    ours = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    late = json.loads((out / "claims" / "late" / "claims.json").read_text())
    acc = {r["set"]: r for r in pair["accuracy"]}
    assert set(acc) == set(ours["final"])
    one = acc["1var/ind"]
    want = mannwhitneyu(ours["final"]["1var/ind"], late["final"]["1var/ind"]).pvalue
    assert one["mann_whitney"]["pvalue"] == pytest.approx(want)
    assert one["a"]["mean"] == pytest.approx(ours["final_stats"]["1var/ind"]["robust"]["mean"])
    assert one["share_a"]["n"] == 4
    assert "| first | ours 3 of 4, late 4 of 4 |" in (
        out / "claims" / "comparison" / "comparison.md").read_text()
    assert (out / "claims" / "late" / "claims.json").exists()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_empty_population_is_one_error_line(tmp_path, capsys):
    config = grid_config(tmp_path)
    assert summarize(config, tmp_path / "nothing") == 2
    assert "empty population" in one_error_line(capsys)
    (tmp_path / "unfinished" / "members").mkdir(parents=True)
    assert summarize(config, tmp_path / "unfinished") == 2
    line = one_error_line(capsys)
    assert "variant 'ours': empty population" in line and "none trained" in line


def test_members_of_different_configs_mixed_is_one_error_line(tmp_path, capsys):
    config, out = write_population(tmp_path)
    path = out / "members" / "ours_seed2" / "config.toml"
    path.write_text(path.read_text().replace("lr = 0.001", "lr = 0.003"))
    assert summarize(config, out) == 2
    line = one_error_line(capsys)
    assert "ours_seed2" in line and "another config" in line and "train.lr = 0.003" in line
    assert not (out / "claims").exists()


def test_member_without_metrics_is_one_error_line(tmp_path, capsys):
    config, out = write_population(tmp_path)
    (out / "members" / "ours_seed1" / "metrics.jsonl").unlink()
    assert summarize(config, out) == 2
    line = one_error_line(capsys)
    assert "ours_seed1" in line and "without metrics" in line
    assert not (out / "claims").exists()


def test_unfinished_members_are_listed_not_counted(tmp_path):
    config, out = write_population(tmp_path)
    member = out / "members" / "ours_seed3"
    (member / "summary.json").unlink()  # a member still training: metrics up to step 2 000
    lines = (member / "metrics.jsonl").read_text().splitlines(keepends=True)
    (member / "metrics.jsonl").write_text("".join(lines[:21]))
    assert summarize(config, out, "--no-figures") == 0
    assert not (out / "claims" / "ours" / "final.png").exists()
    c = claims_of(out)
    assert c["members"] == 3 and c["member_names"] == ["ours_seed0", "ours_seed1", "ours_seed2"]
    assert c["not_counted"] == [{"member": "ours_seed3", "status": "unfinished", "step": 2000}]
    assert c["final"]["1var/var"] == pytest.approx([1.0, 0.995, 0.975])
    assert not math.isnan(c["final_stats"]["1var/var"]["robust"]["mean"])


def test_plot_functions_return_figures_and_save_in_any_format(population, tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from empirical.experiments.population import figures

    c = population[2]
    before = set(tmp_path.iterdir())
    for fig in (figures.plot_jumps(c), figures.plot_survival([("ours", c)]),
                figures.plot_final(c), figures.plot_theory(c)):  # fmt: skip
        assert isinstance(fig, Figure) and fig.axes[0].get_xlabel()
        assert fig.get_suptitle() or fig.axes[0].get_title()
        plt.close(fig)
    assert set(tmp_path.iterdir()) == before  # nothing written without a path
    fig = figures.plot_final(c, tmp_path / "final", fmt="pdf")
    assert (tmp_path / "final.pdf").read_bytes().startswith(b"%PDF-")


def test_second_jumps_without_a_first_before_them_are_counted():
    from empirical.experiments.population.claims import second_without_first

    # none before (no first, a first at the same evaluation, a first after) against one that
    # follows a first; members without a second jump do not count
    first = [None, 1900, 2000, 1500, 1700, None]
    second = [1400, 1900, 1800, 3000, None, None]
    assert second_without_first(first, second) == 3
    assert second_without_first([], []) == 0


def _claims_with(first, second, same_config):
    from empirical.report.population_stats import kaplan_meier

    last = [3000] * len(first)
    return {"paper_run": {"same_config": same_config} if same_config is not None else None,
            "jumps": {"paper": {"first": 5401, "second": 15201}, "last_step": last,
                      "first": first, "second": second,
                      "first_survival": kaplan_meier(first, last).to_dict(),
                      "second_survival": kaplan_meier(second, last).to_dict(),
                      "second_without_first": 1}}  # fmt: skip


def test_survival_figure_gives_p_against_the_first_and_the_paper_only_for_its_config():
    import matplotlib.pyplot as plt

    from empirical.experiments.population import figures

    a = _claims_with([1300, 1400], [None, None], same_config=False)
    b = _claims_with([None, 1700], [1400, None], same_config=None)
    fig = figures.plot_survival([("softmax", a), ("linear", b)],
                                pvalues={"linear": {"first": 0.00047, "second": 0.062}})
    first_labels = fig.axes[0].get_legend_handles_labels()[1]
    second_labels = fig.axes[1].get_legend_handles_labels()[1]
    assert first_labels == ["softmax: 2 of 2 jump", "linear: 1 of 2 jump; p = 0.00047 vs softmax"]
    assert "linear: 1 of 2 jump, 1 with no first jump before; p = 0.062 vs softmax" in second_labels
    assert not any("paper" in t for t in first_labels + second_labels)  # another config
    # the legend sits below its panel, off the curves
    assert fig.axes[0].get_legend().get_bbox_to_anchor().y0 < fig.axes[0].get_window_extent().y0
    plt.close(fig)
    same = _claims_with([1300, 1400], [None, None], same_config=True)
    fig = figures.plot_survival([("ours", same)])
    assert any("the paper's run: 5401" in t for t in fig.axes[0].get_legend_handles_labels()[1])
    plt.close(fig)
