"""A single run placed in its published population (report.md's "This run in its population"):
the lookup by config fingerprint without the seed, this run's values and ranks (one-sided p =
k / (N + 1)), what N members can show, a run that is a member placed against the others, the
paper's run's steps aligned to the members' grid, and the one line when no population matches;
`recount` brings a published claims.json to this form from what it holds."""

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
    grid_offset,
    place_run,
    place_values,
    population_section,
    rank_among,
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


def test_a_rank_counts_ties_against_the_run():
    assert rank_among([1, 2, 3, 4], 5) == {"rank": 1, "of": 5, "side": "above", "p": 0.2,
                                           "beyond_all": True}  # fmt: skip
    assert rank_among([1, 2, 3, 4], 0)["side"] == "below"
    assert rank_among([1, 2, 3, 4], 4)["rank"] == 2  # a tie with the top member: not beyond
    assert rank_among([1, 1, 1], 1)["p"] == 1.0
    assert rank_among([None, 2.0], 3.0)["of"] == 2 and rank_among([None], 1.0) is None


def test_beyond_every_one_of_four_members_is_no_tail(published, tmp_path):
    folder, cfg = published
    run = tmp_path / "run"
    write_member(run, dataclasses.replace(cfg, seed=9, name="my_run"), 9, curve=tail_curve,
                 first={9: None}, second={9: None})  # fmt: skip
    rows = {r["claim"]: r for r in place_run(run, json.loads(
        (folder / "synthetic" / "claims.json").read_text()))}  # fmt: skip
    one = rows["> 99% on every 1var set (Fig. 2)"]
    assert (one["outcome"], one["value"]) == ("no", 0.3)
    assert one["rank"] == {"rank": 1, "of": 5, "side": "below", "p": 0.2, "beyond_all": True}
    assert one["same_outcome"] == [2, 4] and one["tail"] is None
    first = rows["first spike: variable routing, present"]  # no jump here, as seed 3
    assert (first["outcome"], first["same_outcome"]) == ("no", [1, 4])

    text = population_section(run, folder)
    assert "`synthetic.ours`, 4 members (seeds 0, 1, 2, 3)" in text
    assert ("| > 99% on every 1var set (Fig. 2) | no (30.00%) | rank 1 of 5 from the bottom "
            "(p = 1/5) | 2 of 4 | seed-dependent, 2 of 4 |") in text  # fmt: skip
    assert "With 4 members a rank gives p >= 1/5 = 0.200" in text
    assert "is in the population's tail (p <= 0.05) on no check" in text


def test_beyond_every_one_of_twenty_members_is_in_the_tail():
    entry = {"claim": "c", "quantity": "first jump step", "outcomes": ["yes"] * 20,
             "values": list(range(1000, 3000, 100)), "holds": 20, "of": 20, "verdict": "holds"}
    row = place_values(entry, "yes", 5401, offset=1)
    assert row["aligned_value"] == 5400 and row["rank"]["p"] == pytest.approx(1 / 21)
    assert row["tail"] == "5400: rank 1 of 21 from the top (p = 1/21)"
    assert place_values(entry, "no", 2000)["tail"] == "'no' here, as in 0 of 20 members"


def test_a_member_is_placed_against_the_other_members(published, tmp_path):
    folder, cfg = published
    claims = json.loads((folder / "synthetic" / "claims.json").read_text())
    run = tmp_path / "seed3"  # the population's own seed 3, trained again
    write_member(run, dataclasses.replace(cfg, seed=3, name="again"), 3)
    rows = {r["claim"]: r for r in place_run(run, claims)}
    one = rows["> 99% on every 1var set (Fig. 2)"]  # 0.60: below the other three members
    assert one["rank"]["of"] == 4 and one["rank"]["rank"] == 1 and one["same_outcome"] == [1, 3]
    text = population_section(run, folder)
    assert "This run is the population's member ours_seed3: it is placed against" in text
    assert "With 3 members a rank gives p >= 1/4 = 0.250" in text
    claims["claims"] = [dict(c, values=c["values"][:3] + [0.6]) if c["claim"].startswith(
        "> 99% on every 1var set (Fig. 2)") else c for c in claims["claims"]]  # fmt: skip
    from empirical.experiments.population.placement import place_member

    one = next(r for r in place_member(claims, 3) if r["claim"].startswith("> 99% on every 1var"))
    assert one["rank"]["of"] == 4 and one["same_outcome"] == [1, 3]  # from claims.json alone


def test_the_steps_of_a_run_on_another_grid_are_aligned():
    assert grid_offset([1, 101, 501, 4901, 5001], 100) == 1
    assert grid_offset([0, 100, 200], 100) == 0 and grid_offset([99, 199], 100) == -1
    assert grid_offset([1, 150], 100) == 0  # no common remainder: left as it is


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


def _paper_run(tmp_path, cfg):
    """A run of the population's config with evaluations at 1 + 100k (the paper's grid)."""
    paper = tmp_path / "paper_run"
    write_member(paper, dataclasses.replace(cfg, seed=42, name="authors"), 42, curve=tail_curve,
                 first={42: 5401}, second={42: 15201})  # fmt: skip
    lines = (paper / "metrics.jsonl").read_text().splitlines()
    shifted = [json.dumps({**json.loads(x), "step": json.loads(x)["step"] + 1}) for x in lines]
    (paper / "metrics.jsonl").write_text("\n".join(shifted) + "\n")
    summary = json.loads((paper / "summary.json").read_text())
    summary["phases"]["first_spike"]["jump_start_step"] = 5301
    summary["phases"]["zero_var_learned_step"] = 1001  # on its own grid too
    (paper / "summary.json").write_text(json.dumps(summary))
    return paper


def test_claims_places_the_papers_run_and_reads_its_jumps(tmp_path):
    """`claims --paper-run DIR`: the run placed by rank, its steps aligned, its jumps read
    from its summary (claims.json's jumps.paper), in claims.json and .md."""
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    config, out = write_population(tmp_path)
    base, spec = load_grid_config(config)
    paper = _paper_run(tmp_path, expand_grid(base, spec)[0].cfg)
    assert main(["--config", str(config), "--out", str(out), "--summarize", "--no-analysis",
                 "--no-figures", "--paper-run", str(paper)]) == 0  # fmt: skip
    claims = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    placed = claims["paper_run"]
    assert placed["same_config"] is True and placed["differences"] == []
    assert placed["grid_offset"] == 1 and placed["other_differences"] == []  # not imported
    assert claims["jumps"]["paper"] == {"first": 5401, "second": 15201}
    assert claims["jumps"]["paper_interval"]["first"] == [5301, 5401]
    rows = {r["claim"]: r for r in placed["rows"]}
    first = rows["first spike: variable routing, at the paper's steps"]
    assert (first["outcome"], first["value"], first["aligned_value"]) == ("yes", 5401, 5400)
    assert first["rank"]["rank"] == 1 and first["tail"] is None  # 1 of 5: p = 0.2
    md = (out / "claims" / "ours" / "claims.md").read_text()
    assert "## The paper's run in this population" in md and "5301 -> 5401" in md
    assert "5401; on the members' grid 5400" in md


def test_recount_brings_a_published_file_to_the_present_form(tmp_path):
    """`recount`: an old claims.json (one spike claim with "no (timing)", a percentile
    placement) gets the split claims, the leans and the paper's run by rank; its jumps read
    from the run given."""
    from empirical.__main__ import main as empirical_main
    from empirical.experiments.sweep.spec import expand_grid, load_grid_config

    config, out = write_population(tmp_path)
    base, spec = load_grid_config(config)
    paper = _paper_run(tmp_path, expand_grid(base, spec)[0].cfg)
    assert main(["--config", str(config), "--out", str(out), "--summarize", "--no-analysis",
                 "--no-figures", "--paper-run", str(paper)]) == 0  # fmt: skip
    new = json.loads((out / "claims" / "ours" / "claims.json").read_text())
    old = json.loads(json.dumps(new))  # the same population in the old form
    old["claims"] = [c for c in old["claims"] if ", present" not in c["claim"]]
    for c in old["claims"]:
        if c["claim"].endswith(", at the paper's steps"):
            c["claim"] = c["claim"].rsplit(",", 1)[0]
            c["outcomes"] = ["no (timing)" if v is not None else "no" for v in c["values"]]
    old["paper_run"] = {"run_dir": "x", "same_config": True, "differences": [], "rows": [
        {"claim": r["claim"].rsplit(",", 1)[0] if "spike:" in r["claim"] else r["claim"],
         "outcome": r["outcome"], "value": r["value"], "quantity": r["quantity"]}
        for r in new["paper_run"]["rows"] if ", present" not in r["claim"]]}  # fmt: skip
    folder = tmp_path / "published" / "ours"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps(old))
    assert empirical_main(["recount", str(folder), "--paper-run", str(paper),
                           "--no-figures"]) == 0  # fmt: skip
    got = json.loads((folder / "claims.json").read_text())
    assert [c["claim"] for c in got["claims"]] == [c["claim"] for c in new["claims"]]
    for a, b in zip(got["claims"], new["claims"], strict=True):
        assert (a["outcomes"], a["holds"], a["verdict"], a["lean"]) == (
            b["outcomes"], b["holds"], b["verdict"], b["lean"])
    assert [r["rank"] for r in got["paper_run"]["rows"]] == [
        r["rank"] for r in new["paper_run"]["rows"]]
    assert got["jumps"]["paper_interval"] == new["jumps"]["paper_interval"]
    assert "python -m empirical recount" in got["recount_provenance"]["command"]
    assert empirical_main(["recount", str(tmp_path / "nothing")]) == 2
