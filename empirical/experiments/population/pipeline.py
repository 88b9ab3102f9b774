"""From a population directory (a grid directory) to its claims: check every existing member's
config, analyse the finished members where needed, count, write. A variant without a finished
member is a PopulationError.

    done = summarize_population(base, spec, "runs/population/population_authors", jobs=4)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from empirical.experiments.population.members import (
    FINISHED,
    MISSING,
    PopulationError,
    check_config,
    member_status,
    read_analysis,
    read_member,
)
from empirical.runs.rundir import SweepDir


def read_variants(base, spec, out: Path) -> tuple[dict[str, list], dict[str, list[dict]]]:
    """({variant: [finished Member]}, {variant: [not counted: member, status, step]}), every
    existing member's config checked first."""
    from empirical.experiments.sweep.grid import expand_grid

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
    base, spec, out, *, jobs: int = 1, analysis: bool = True, fmt: str = "png",
    window: int | None = None, figures: bool = True, paper_run=None,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict]:  # fmt: skip
    """claims.json content per variant, written with claims.md and the figures to
    OUT/claims/<variant>/ (and OUT/claims/comparison/ for two or more variants). analysis:
    run analyze and compare-qk where a finished member lacks them (False: use what exists).
    window: the robust final accuracy's window (default ROBUST_WINDOW). figures: False writes
    JSON and markdown only. paper_run: a run directory placed in every population."""
    from empirical.experiments.population.claims import population_claims
    from empirical.experiments.population.compare import compare_populations, write_comparison
    from empirical.experiments.population.prepare import existing_spike, prepare_members
    from empirical.experiments.population.quantities import ROBUST_WINDOW
    from empirical.experiments.population.report import write_claims
    from empirical.runs.rundir import RunDir

    say = log or (lambda _text: None)
    out = Path(out)
    finished, skipped = read_variants(base, spec, out)
    everyone = [m for ms in finished.values() for m in ms]
    for variant, members in finished.items():
        extra = f"; not counted: {len(skipped[variant])}" if skipped[variant] else ""
        say(f"population {base.name}.{variant}: {len(members)} finished members{extra}")
    if analysis:
        say(f"analysing {len(everyone)} members where needed ({jobs} process(es))")
        prepare_members(everyone, jobs=jobs, log=say)
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
            window=ROBUST_WINDOW if window is None else window,
        )  # fmt: skip
        if paper_run is not None:
            from empirical.experiments.population.placement import paper_run_entry

            claims["paper_run"] = paper_run_entry(paper_run, claims)
        paths = write_claims(claims, root.claims_of(variant), fmt, figures)
        say(f"wrote {', '.join(str(p) for p in paths)}")
        done[variant] = claims
    if len(done) > 1:
        paths = write_comparison(compare_populations(done), done, root.claims_dir, fmt,
                                 figures)
        say(f"wrote {', '.join(str(p) for p in paths)}")
    return done
