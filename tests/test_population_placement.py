"""A single run placed in its published population (report.md's "This run in its population"):
the lookup by config fingerprint without the seed, this run's values and percentiles, the tail
sentence, and the one line when no population matches."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from population_fixture import write_member, write_population

from empirical.cli.claims import main
from empirical.experiments.population.members import population_fingerprint
from empirical.experiments.population.placement import (
    find_population,
    place_run,
    population_section,
)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(folder of published populations, a member config of the population)."""
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    tmp = tmp_path_factory.mktemp("published")
    config, out = write_population(tmp)
    assert main(["--config", str(config), "--out", str(out), "--summarize", "--no-analysis",
                 "--no-figures"]) == 0  # fmt: skip
    folder = tmp / "populations"
    (folder / "synthetic").mkdir(parents=True)
    shutil.copy(out / "claims" / "ours" / "claims.json", folder / "synthetic" / "claims.json")
    base, spec = load_grid_config(config)
    return folder, expand_grid(base, spec)[0].cfg


def tail_curve(_seed: int, step: int) -> float:  # 1var/var: learned, then 30% at the end
    return 0.3 if step == 4000 else (1.0 if step >= 1000 else 0.0)


def test_a_run_of_another_seed_and_name_finds_its_population(published, tmp_path):
    folder, cfg = published
    mine = dataclasses.replace(cfg, seed=9, name="my_run")
    assert population_fingerprint(mine) == population_fingerprint(cfg)
    path, claims = find_population(mine, folder)
    assert path.parent.name == "synthetic" and claims["members"] == 4
    other = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, lr=0.002))
    assert find_population(other, folder) is None
    # the one with the most members wins where several match
    bigger = dict(claims, members=40)
    (folder.parent / "more" / "big").mkdir(parents=True)
    (folder.parent / "more" / "big" / "claims.json").write_text(json.dumps(bigger))
    shutil.copytree(folder / "synthetic", folder.parent / "more" / "synthetic")
    assert find_population(mine, folder.parent / "more")[0].parent.name == "big"


def test_a_run_in_the_tail_is_told_so(published, tmp_path):
    folder, cfg = published
    run = tmp_path / "run"
    write_member(run, dataclasses.replace(cfg, seed=9, name="my_run"), 9, curve=tail_curve,
                 first={9: None}, second={9: None})  # fmt: skip
    rows = {r["claim"]: r for r in place_run(run, json.loads(
        (folder / "synthetic" / "claims.json").read_text()))}  # fmt: skip
    one = rows["> 99% on every 1var set (Fig. 2)"]
    assert (one["outcome"], one["value"], one["percentile"]) == ("no", 0.3, 0.0)
    assert one["same_outcome"] == [2, 4] and one["population"]["verdict"] == "seed-dependent"
    assert "below every member (percentile 0 of 4)" in one["tail"]
    zero = rows["> 99% on every 0var set (Fig. 2)"]
    assert (zero["outcome"], zero["percentile"], zero["tail"]) == ("yes", 50.0, None)
    first = rows["first spike: variable routing"]  # no jump here, none at the paper's steps
    assert (first["outcome"], first["same_outcome"], first["tail"]) == ("no", [4, 4], None)
    robust = rows["> 99% on every 1var set (Fig. 2), robust final"]
    # (2 000, 4 000]: 19 x 1.0 and 0.3: 0.965 -> no, as in seeds 2 and 3
    assert robust["value"] == pytest.approx(0.965) and robust["outcome"] == "no"

    text = population_section(run, folder)
    assert text.startswith("## This run in its population\n")
    assert "`synthetic.ours`, 4 members (seeds 0, 1, 2, 3)" in text
    assert ("| > 99% on every 1var set (Fig. 2) | no (30.00%) | 0 | 2 of 4 | 50.0% [15.0, "
            "85.0] | seed-dependent |") in text  # fmt: skip
    assert "**This run is in the population's tail** on > 99% on every 1var set" in text


def test_a_run_like_its_members_lies_within(published, tmp_path):
    folder, cfg = published
    run = tmp_path / "run"
    write_member(run, dataclasses.replace(cfg, seed=9), 9, curve=lambda s, step: (
        1.0 if step >= 1000 else 0.0), first={9: 1000}, second={9: 2000})  # fmt: skip
    text = population_section(run, folder)
    assert "This run lies within its population on every check." in text


def test_a_run_of_another_config_gets_one_line(published, tmp_path):
    folder, cfg = published
    run = tmp_path / "run"
    other = dataclasses.replace(cfg, seed=9, train=dataclasses.replace(cfg.train, lr=0.002))
    write_member(run, other, 9)
    text = population_section(run, folder)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[0] == "## This run in its population" and len(lines) == 2
    assert lines[1].startswith("No published population matches this run's config")
    assert population_fingerprint(other)[:12] in lines[1]
    # no published folder at all: the same line
    assert "No published population" in population_section(run, tmp_path / "absent")


def test_claims_places_the_papers_run(tmp_path):
    """`claims --paper-run DIR`: the run placed in the population, in claims.json and .md."""
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    config, out = write_population(tmp_path)
    base, spec = load_grid_config(config)
    cfg = expand_grid(base, spec)[0].cfg
    paper = tmp_path / "paper_run"
    write_member(paper, dataclasses.replace(cfg, seed=42, name="authors"), 42, curve=tail_curve,
                 first={42: 5401}, second={42: 15201})  # fmt: skip
    assert main(["--config", str(config), "--out", str(out), "--summarize", "--no-analysis",
                 "--no-figures", "--paper-run", str(paper)]) == 0  # fmt: skip
    claims = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    placed = claims["paper_run"]
    assert placed["same_config"] is True and placed["differences"] == []
    first = next(r for r in placed["rows"] if r["claim"] == "first spike: variable routing")
    assert first["outcome"] == "yes" and first["value"] == 5401 and first["percentile"] == 100.0
    assert first["tail"] == "'yes' here, as in 0 of 4 members (the population: fails)"
    md = (out / "claims" / "ours" / "claims.md").read_text()
    assert "## The paper's run in this population" in md
    assert "**The paper's run is in the population's tail**" in md
