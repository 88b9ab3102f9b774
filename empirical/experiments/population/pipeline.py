"""From a population directory (a grid directory) to its claims: check every existing member's
config, analyse the finished members where needed, count, write. A variant without a finished
member is a PopulationError.

    done = summarize_population(base, spec, "runs/population/population_authors",
                                PopulationOptions(jobs=4))
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from empirical.experiments.population.claims import population_claims, with_paper_run
from empirical.experiments.population.compare import compare_populations, comparison_report
from empirical.experiments.population.members import (
    FINISHED,
    MISSING,
    PopulationError,
    check_config,
    existing_spike,
    member_status,
    read_analysis,
    read_member,
)
from empirical.experiments.population.options import PopulationOptions
from empirical.experiments.population.placement import paper_run_entry
from empirical.experiments.population.prepare import prepare_members
from empirical.experiments.population.report import claims_report
from empirical.experiments.sweep.spec import expand_grid
from empirical.report.writer import write_report
from empirical.runs.rundir import RunDir, SweepDir


def read_variants(base, spec, out: Path) -> tuple[dict[str, list], dict[str, list[dict]]]:
    """({variant: [finished Member]}, {variant: [not counted: member, status, step]}), every
    existing member's config checked first."""
    root = SweepDir(out)
    if not root.members_dir.is_dir():
        raise PopulationError(f"{out}: empty population (no {SweepDir.MEMBERS}/ folder): train it "
                              "with the same command without --summarize, or give the "
                              "population's directory with --out")
    planned = expand_grid(base, spec)
    finished: dict[str, list] = {v: [] for v in spec.variants}
    skipped: dict[str, list[dict]] = {v: [] for v in spec.variants}
    for m in planned:
        run = root.member(m.dirname)
        if run.is_run():
            check_config(run, m.cfg, m.value)
    for m in planned:
        run = root.member(m.dirname)
        status, step = member_status(run, m.cfg.train.steps)
        if status == FINISHED:
            finished[m.value].append(read_member(run, m.cfg, m.value))
        else:
            skipped[m.value].append({"member": m.dirname, "status": status, "step": step})
    for variant, members in finished.items():
        if not members:
            states = sorted({s["status"] for s in skipped[variant]})
            missing = all(s == MISSING for s in states)
            raise PopulationError(
                f"variant {variant!r}: empty population: no finished member of "
                f"{len(skipped[variant])} in {root.members_dir} ("
                + ("none trained" if missing else ", ".join(states))
                + "); train it (the same command without --summarize) or leave it out with --only"
            )
    return finished, skipped


def summarize_population(
    base, spec, out, opts: PopulationOptions | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict]:  # fmt: skip
    """claims.json content per variant, written with claims.md and the figures to
    OUT/claims/<variant>/ (and OUT/claims/comparison/ for two or more variants). opts:
    `analysis` runs analyze and compare-qk where a finished member lacks them (False: use
    what exists) in `jobs` processes; `final_window` is the robust final accuracy's window;
    `figures` False writes JSON and markdown only; `paper_run` is a run directory placed in
    every population."""
    opts = opts or PopulationOptions()
    say = log or (lambda _text: None)
    out = Path(out)
    finished, skipped = read_variants(base, spec, out)
    everyone = [m for ms in finished.values() for m in ms]
    for variant, members in finished.items():
        extra = f"; not counted: {len(skipped[variant])}" if skipped[variant] else ""
        say(f"population {base.name}.{variant}: {len(members)} finished members{extra}")
    if opts.analysis:
        say(f"analysing {len(everyone)} members where needed ({opts.jobs} process(es))")
        prepare_members(everyone, jobs=opts.jobs, log=say)
    else:
        for m in everyone:
            m.analysis = read_analysis(RunDir(m.path))
            m.spike = existing_spike(RunDir(m.path))
    root = SweepDir(out)
    done = {}
    for variant, members in finished.items():
        claims = population_claims(
            members, variant=variant, name=f"{base.name}.{variant}",
            overrides=spec.variants[variant], not_counted=skipped[variant],
            window=opts.final_window,
        )  # fmt: skip
        if opts.paper_run is not None:
            claims = with_paper_run(claims, paper_run_entry(opts.paper_run, claims))
        paths = write_report(claims_report(claims, opts.format), root.claims_of(variant),
                             opts.figures, opts.format)  # fmt: skip
        say(f"wrote {', '.join(str(p) for p in paths.values())}")
        done[variant] = claims
    if len(done) > 1:
        report = comparison_report(compare_populations(done), done, opts.format)
        paths = write_report(report, root.claims_dir / SweepDir.COMPARISON, opts.figures,
                             opts.format)  # fmt: skip
        say(f"wrote {', '.join(str(p) for p in paths.values())}")
    return done
