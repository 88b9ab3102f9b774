"""The whole paper in one command (docs/training.md, "The main job"); the stages, in order, and
what each writes under runs/<name>/:

1. theory tests and 2. theory report (subprocesses; theory_report.md);
3. the paper's run (paper_run_stages): the authors' checkpoints imported, evaluated at every
   step, analysed and compared with the theory (authors_checkpoints/);
4. our training (_our_run_stages; seed<N>/), then 5. its analyze and compare-qk;
6. report.md (empirical.experiments.reproduce_report).

With `parallel` the theory's and the paper's run's stages run in background processes beside
our training (empirical.experiments.scheduling). A finished stage is not redone.

    python -m empirical reproduce --config configs/paper.toml train.steps=2000
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from disentangled.errors import UserError
from empirical.analysis.run_analysis import analyze_run
from empirical.bridge.compare_qk.options import Options
from empirical.bridge.compare_qk.outputs import report
from empirical.bridge.compare_qk.run_comparison import compare_run
from empirical.config.paths import repo_root
from empirical.experiments.reproduce_report import Stage, render_report
from empirical.experiments.scheduling import (
    BackgroundProcesses,
    ThreadWidening,
    background_workers,
    follow_training,
    say,
    subprocess_env,
)
from empirical.report.writer import write_report
from empirical.runs.import_run import import_checkpoints
from empirical.runs.lock import writer_lock
from empirical.runs.rundir import RunDir, RunDirError
from empirical.train.evaluate_run import evaluate_all_steps
from empirical.train.loop import train_run

ROOT = repo_root()
AUTHORS_CONFIG = ROOT / "configs" / "authors.toml"
PAPER_RUN = "authors_checkpoints"  # the folder of the paper's run under runs/<name>/


def _subprocess_stage(stage: Stage, argv: list[str]) -> None:
    """argv as a subprocess (its threads: scheduling.subprocess_env)."""
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=subprocess_env())
    stage.seconds = time.perf_counter() - t
    lines = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if line.strip()]
    stage.detail = lines[-1] if lines else ""
    stage.status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"


def _library_stage(stage: Stage, fn) -> None:
    """Run one stage in-process; a UserError (e.g. no snapshots) marks it failed, with why."""
    t = time.perf_counter()
    try:
        fn()
        stage.status = "ok"
    except UserError as exc:
        stage.status, stage.detail = "failed", str(exc)
    stage.seconds = time.perf_counter() - t


def _up_to_date(output: Path, model: Path) -> bool:
    """Whether a stage's output exists and is newer than the model it was made from."""
    return output.exists() and output.stat().st_mtime >= model.stat().st_mtime


def _stage(stages: list[Stage], name: str) -> Stage:
    """A new stage, announced and appended to `stages`."""
    st = Stage(name)
    stages.append(st)
    say(f"stage: {name}")
    return st


def _run_dir_stage(run: RunDir, root: Path, name: str, output: Path, fn) -> Stage:
    """A stage of one run directory: kept where `output` is newer than the final model, else
    fn() run; it links the summary.md beside `output`."""
    st = _stage([], name)
    if _up_to_date(output, run.final_model()):
        st.status, st.detail = "ok", "kept (newer than the final model)"
    else:
        _library_stage(st, fn)
    st.links.append(str(output.parent.relative_to(root) / RunDir.SUMMARY_MD))
    return st


def analyze_stage(run: RunDir, root: Path, progress: bool, label: str = "") -> Stage:
    """`analyze` of one run directory (kept if newer than its final model)."""
    return _run_dir_stage(run, root, f"{label}analyze", run.analysis_dir() / RunDir.ANALYSIS_JSON,
                          lambda: analyze_run(run.path, progress=progress))


def compare_qk_stage(run: RunDir, root: Path, progress: bool, label: str = "",
                     done: dict | None = None) -> Stage:  # fmt: skip
    """`compare-qk` of one run directory (kept if newer than its final model). `done`:
    snapshot analyses made ahead (following_compare_qk_stage)."""
    def compare() -> None:
        result = compare_run(run.path, Options(progress=progress), done=done)
        write_report(report(result), run.compare_qk_dir)

    output = run.compare_qk_dir / RunDir.COMPARE_QK_JSON
    return _run_dir_stage(run, root, f"{label}compare-qk", output, compare)


def following_compare_qk_stage(run: RunDir, root: Path, stop) -> Stage:
    """Our run's compare-qk in a background process: each snapshot analysed as it appears
    while the training runs (scheduling.follow_training); once `stop` is set, compare_qk_stage
    does the rest. The same outputs as compare_qk_stage alone."""
    try:  # a finished run, compared already: nothing to follow
        kept = _up_to_date(run.compare_qk_dir / RunDir.COMPARE_QK_JSON, run.final_model())
    except RunDirError:  # no model yet: the training has not written one
        kept = False
    done = {} if kept else follow_training(run, stop)
    st = compare_qk_stage(run, root, False, done=done)
    if done:
        st.detail = (st.detail + "; " if st.detail else "") + (
            f"{len(done)} snapshot(s) analysed ahead, while the training ran (not in this time)"
        )
    return st


def _analysis_stages(run: RunDir, root: Path, stages: list[Stage], progress: bool,
                     label: str = "") -> None:  # fmt: skip
    """analyze and compare-qk of one run directory, one after the other."""
    stages.append(analyze_stage(run, root, progress, label))
    stages.append(compare_qk_stage(run, root, progress, label))


def theory_tests_stage(root: Path) -> list[Stage]:
    """`pytest theory`, a subprocess (one stage, in a list)."""
    st = _stage([], "theory tests")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "theory"]
    _subprocess_stage(st, argv)
    return [st]


def theory_report_stage(root: Path) -> list[Stage]:
    """The theory report (root/theory_report.md), a subprocess (one stage, in a list)."""
    st = _stage([], "theory report")
    report = root / "theory_report.md"
    _subprocess_stage(st, [sys.executable, "-m", "theory", "report", "--out", str(report)])
    st.links.append(report.name)
    return [st]


def theory_stages(root: Path) -> list[Stage]:
    """`pytest theory` and the theory report (root/theory_report.md), one after the other."""
    return theory_tests_stage(root) + theory_report_stage(root)


def paper_run_stages(authors: Path | None, root: Path, progress: bool) -> list[Stage]:
    """The paper authors' run: imported from the checkpoints folder `authors` into
    root/authors_checkpoints (skipped, with a note, where it is absent or None), evaluated at
    every step, analysed and compared with the theory; each part kept where done."""
    theirs = RunDir(root / PAPER_RUN)
    stages: list[Stage] = []
    st = _stage(stages, "the paper's run: import + evaluate")
    if authors is None:
        st.status, st.detail = "skipped", "not asked for (--authors DIR)"
        return stages
    if not Path(authors).is_dir():
        st.status = "skipped"
        st.detail = (f"no checkpoints folder at {authors} (give --authors DIR: the authors' "
                     "checkpoint_step_N.pth files)")
        return stages

    def import_and_evaluate() -> None:
        if not theirs.imported.exists():
            import_checkpoints(authors, AUTHORS_CONFIG, theirs.path, overwrite=True)
        if not theirs.summary.exists():
            evaluate_all_steps(theirs, progress=progress)

    _library_stage(st, import_and_evaluate)
    if st.status == "ok":
        st.links.append(str(theirs.training_curves.relative_to(root)))
        _analysis_stages(theirs, root, stages, progress, "the paper's run: ")
    return stages


def _our_run_stages(cfg, run: RunDir, root: Path, progress: bool, background=None,
                    background_done=None) -> list[Stage]:  # fmt: skip
    """Our training of `cfg` in `run` (resumed where it has a checkpoint), analysed; with
    `background` (scheduling.BackgroundProcesses) its compare-qk runs there
    (following_compare_qk_stage; `background.stop` is set when the training ends).
    `background_done()`: whether the background stages have finished (ThreadWidening)."""
    stages: list[Stage] = []
    st = _stage(stages, "train")
    t = time.perf_counter()
    resume = run.last_checkpoint.exists()
    widen = ThreadWidening(cfg, background_done)
    compared = None
    if background is not None:  # our compare-qk follows the snapshots once the worker is free
        compared = background.submit(following_compare_qk_stage, run, root, background.stop)
    try:
        result = train_run(cfg, run.path, resume=resume, progress=progress, on_eval=widen)
    finally:
        widen.restore()
        if background is not None:
            background.stop.set()
    st.seconds, st.status = time.perf_counter() - t, "ok"
    st.detail = (f"{cfg.name} seed {cfg.seed}: {result.step} steps"
                 + (" (resumed)" if resume else "") + widen.note())
    st.links.append(str(run.training_curves.relative_to(root)))
    if background is None:
        _analysis_stages(run, root, stages, progress)
        return stages
    stages.append(analyze_stage(run, root, progress))
    stages.append(compared.get())
    return stages


def _independent_stages(root: Path, skip_theory: bool, authors: Path | None, progress: bool):
    """The stages that do not need our training: the theory's and the paper's run's."""
    theory = [] if skip_theory else theory_stages(root)
    return theory, paper_run_stages(authors, root, progress)


def _start_independent(submit, workers: int, root: Path, skip_theory: bool, authors):
    """Submit the independent stages (`submit(fn, *args)`: BackgroundProcesses.submit);
    returns (wait, done): wait() waits for them and gives (theory stages, paper's run
    stages), done() says whether they have finished. With 4 workers each stage is its own
    task (scheduling.background_workers)."""
    if workers < 4:
        job = submit(_independent_stages, root, skip_theory, authors, False)
        return job.get, job.ready
    theory_fns = () if skip_theory else (theory_tests_stage, theory_report_stage)
    theory_jobs = [submit(fn, root) for fn in theory_fns]
    paper = submit(paper_run_stages, authors, root, False)

    def wait():
        return [st for job in theory_jobs for st in job.get()], paper.get()

    def done():
        return all(job.ready() for job in [*theory_jobs, paper])

    return wait, done


def reproduce(cfg, runs_root: Path, skip_theory: bool = False, progress: bool = True,
              authors: Path | None = None, parallel: bool | None = None) -> Path:  # fmt: skip
    """Run every stage for `cfg` (a RunConfig); returns the path of the report. `authors`: the
    paper authors' checkpoints folder (skipped, with a note, where absent or None).
    `parallel` (default: 2 or more CPU cores): the theory and paper's-run stages, and our
    compare-qk, in background processes (the results are those of running them in turn).
    Our run directory's writer lock is taken first and held to the end."""
    run = RunDir(Path(runs_root) / cfg.name / f"seed{cfg.seed}")
    with writer_lock(run, "--runs-root"):
        return _reproduce(cfg, run, skip_theory, progress, authors, parallel)


def _reproduce(cfg, run: RunDir, skip_theory, progress, authors, parallel) -> Path:
    root = run.path.parent
    theirs = RunDir(root / PAPER_RUN)
    root.mkdir(parents=True, exist_ok=True)
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= 2
    t_all = time.perf_counter()
    if parallel and (authors is not None or not skip_theory):
        # more cores: compare-qk of our run need not wait for the theory, and the theory's
        # two stages and the paper's run need not wait for each other (background_workers)
        workers = background_workers(os.cpu_count() or 1)
        with BackgroundProcesses(workers) as background:
            wait, done = _start_independent(background.submit, workers, root, skip_theory, authors)
            say(f"theory and the paper's run: in {workers} more process(es), beside the training")
            ours = _our_run_stages(cfg, run, root, progress, background, done)
            theory, paper = wait()  # an error there is raised here
    else:
        theory, paper = _independent_stages(root, skip_theory, authors, progress)
        ours = _our_run_stages(cfg, run, root, progress)
    if skip_theory:
        theory = [Stage("theory tests", "skipped"), Stage("theory report", "skipped")]

    stages = theory + paper + ours
    path = root / "report.md"
    paper_run = theirs if theirs.summary.exists() else None
    path.write_text(render_report(cfg, root, run.path, stages, paper_run))
    say(f"wrote {path} ({time.perf_counter() - t_all:.0f} s; stage times in its table)")
    return path
