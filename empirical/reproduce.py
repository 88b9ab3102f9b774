"""The whole paper in one command: theory tests, theory report, the paper authors' own run
(imported from their checkpoints, evaluated at every step, analysed), our training of the
config, its analysis and QK comparison, and `runs/<name>/report.md` linking every figure with
the paper-checks table of both runs side by side.

    python -m empirical reproduce                      # configs/authors.toml, seed 0
    python -m empirical reproduce --config configs/paper.toml   # our reconstruction
    python -m empirical reproduce train.steps=2000     # dotted overrides, as for `train`

A stage that already finished is not redone: training resumes from its checkpoint, the
imported run is kept, and an analysis whose output is newer than its model is kept.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from disentangled.command_line import UserError
from empirical.paper_checks import paper_check_rows, pct
from empirical.run_lock import writer_lock
from empirical.rundir import RunDir, RunDirError

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Stage:
    name: str
    status: str = "not run"
    seconds: float = 0.0
    detail: str = ""
    links: list[str] = field(default_factory=list)


def _say(text: str) -> None:
    print(f"[reproduce] {text}", file=sys.stderr, flush=True)


def _subprocess_stage(stage: Stage, argv: list[str]) -> None:
    """argv as a subprocess, on this process's torch threads (a background process's
    worker_threads) unless OMP_NUM_THREADS is set: on a 16-core machine, five processes of 16
    threads each slowed the theory report 4x."""
    import torch

    t = time.perf_counter()
    threads = str(torch.get_num_threads())
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **os.environ}
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
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


AUTHORS_CONFIG = ROOT / "configs" / "authors.toml"


def _stage(stages: list[Stage], name: str) -> Stage:
    """A new stage, announced and appended to `stages`."""
    st = Stage(name)
    stages.append(st)
    _say(f"stage: {name}")
    return st


def analyze_stage(run: RunDir, root: Path, progress: bool, label: str = "") -> Stage:
    """`analyze` of one run directory (kept if newer than its final model)."""
    from empirical.analysis.report import analyze_run

    st = _stage([], f"{label}analyze")
    if _up_to_date(run.analysis_dir() / RunDir.ANALYSIS_JSON, run.final_model()):
        st.status, st.detail = "ok", "kept (newer than the final model)"
    else:
        _library_stage(st, lambda: analyze_run(run.path, progress=progress))
    st.links.append(str(run.analysis_dir().relative_to(root) / RunDir.SUMMARY_MD))
    return st


def compare_qk_stage(
    run: RunDir, root: Path, progress: bool, label: str = "", done: dict | None = None
) -> Stage:
    """`compare-qk` of one run directory (kept if newer than its final model). `done`:
    snapshot analyses made ahead (following_compare_qk_stage)."""
    from empirical.compare_qk import Options, compare_run, write_outputs

    st = _stage([], f"{label}compare-qk")
    if _compare_qk_up_to_date(run):
        st.status, st.detail = "ok", "kept (newer than the final model)"
    else:
        _library_stage(
            st,
            lambda: write_outputs(
                compare_run(run.path, Options(progress=progress), done=done), run.compare_qk_dir
            ),
        )
    st.links.append(str(run.compare_qk_dir.relative_to(root) / RunDir.SUMMARY_MD))
    return st


@contextlib.contextmanager
def _idle_priority():
    """This process on idle CPU time only, for the duration (Linux SCHED_IDLE; elsewhere the
    lowest nice level), then back where the system allows: work that follows the training must
    not take cores from it. On the 2-core CPU, following at normal priority while the training
    ran on both cores slowed its steps by more than the following saved (2026-11-27)."""
    before = None
    try:
        if hasattr(os, "SCHED_IDLE"):
            before = (os.sched_getscheduler(0), os.sched_getparam(0))
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        else:
            os.nice(19)
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, before[0], before[1])


def _compare_qk_up_to_date(run: RunDir) -> bool:
    return _up_to_date(run.compare_qk_dir / RunDir.COMPARE_QK_JSON, run.final_model())


def following_compare_qk_stage(run: RunDir, root: Path, stop) -> Stage:
    """Our run's compare-qk in the second process: while the training runs, each snapshot that
    has a successor is analysed as it appears (empirical.compare_qk.follow); once `stop` is
    set (the training has ended), compare_qk_stage with those analyses, which does only the
    rest (the last snapshot, the windows, the one-step test, the outputs). The same outputs
    as compare_qk_stage alone (tests/test_compare_qk_pipeline.py). It follows on idle CPU
    time only (_idle_priority), so it gains where a core is spare (3 or more: its own worker
    beside the training); on 2 cores the 2-thread training leaves it almost none (4 of 80
    snapshots in the main job, 2026-11-27) and the tail is as before."""
    from empirical.compare_qk import Options
    from empirical.compare_qk.follow import SnapshotInputs, follow_snapshots

    done: dict = {}
    try:
        kept = _compare_qk_up_to_date(run)  # a finished run, compared already: nothing to follow
    except RunDirError:  # no model yet: the training has not written one
        kept = False
    while not (kept or stop.is_set() or run.is_run()):  # until the training writes its config
        time.sleep(1.0)
    if not kept and run.is_run():
        try:
            with _idle_priority():
                done = follow_snapshots(SnapshotInputs.of(run.path, Options(progress=False)), stop)
        except UserError:  # an unreadable run: compare_qk_stage meets it and says why
            pass  # (done stays empty)
    st = compare_qk_stage(run, root, False, done=done)
    if done:
        st.detail = (st.detail + "; " if st.detail else "") + (
            f"{len(done)} snapshot(s) analysed ahead, while the training ran (not in this time)"
        )
    return st


def _analysis_stages(
    run: RunDir, root: Path, stages: list[Stage], progress: bool, label: str = ""
) -> None:
    """analyze and compare-qk of one run directory, one after the other."""
    stages.append(analyze_stage(run, root, progress, label))
    stages.append(compare_qk_stage(run, root, progress, label))


def theory_tests_stage(root: Path) -> list[Stage]:
    """`pytest theory`, a subprocess (one stage, in a list)."""
    stages: list[Stage] = []
    st = _stage(stages, "theory tests")
    _subprocess_stage(
        st, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "theory"]
    )
    return stages


def theory_report_stage(root: Path) -> list[Stage]:
    """The theory report (root/theory_report.md), a subprocess (one stage, in a list)."""
    stages: list[Stage] = []
    st = _stage(stages, "theory report")
    report = root / "theory_report.md"
    _subprocess_stage(st, [sys.executable, "-m", "theory", "report", "--out", str(report)])
    st.links.append(report.name)
    return stages


def theory_stages(root: Path) -> list[Stage]:
    """`pytest theory` and the theory report (root/theory_report.md), one after the other."""
    return theory_tests_stage(root) + theory_report_stage(root)


def paper_run_stages(authors: Path | None, root: Path, progress: bool) -> list[Stage]:
    """The paper authors' run: imported from the checkpoints folder `authors` into
    root/authors_checkpoints (skipped, with a note, where it is absent or None), evaluated at
    every step, analysed and compared with the theory; each part kept where done."""
    from empirical.evaluation import evaluate_all_steps
    from empirical.import_run import import_checkpoints

    theirs = RunDir(root / PAPER_RUN)
    stages: list[Stage] = []
    st = _stage(stages, "the paper's run: import + evaluate")
    if authors is None:
        st.status, st.detail = "skipped", "not asked for (--authors DIR)"
        return stages
    if not Path(authors).is_dir():
        st.status = "skipped"
        st.detail = (
            f"no checkpoints folder at {authors} (give --authors DIR: the authors' "
            "checkpoint_step_N.pth files)"
        )
        return stages
    t = time.perf_counter()
    try:
        if not theirs.imported.exists():
            import_checkpoints(authors, AUTHORS_CONFIG, theirs.path, overwrite=True)
        if not theirs.summary.exists():
            evaluate_all_steps(theirs, progress=progress)
        st.status = "ok"
        st.links.append(str(theirs.training_curves.relative_to(root)))
    except UserError as exc:
        st.status, st.detail = "failed", str(exc)
    st.seconds = time.perf_counter() - t
    if st.status == "ok":
        _analysis_stages(theirs, root, stages, progress, "the paper's run: ")
    return stages


def _our_run_stages(
    cfg, run: RunDir, root: Path, progress: bool, pool=None, background_done=None, stop=None
) -> list[Stage]:
    """Our training of `cfg` in `run` (resumed where it has a checkpoint), analysed; with a
    `pool` (the second process), its compare-qk there (following_compare_qk_stage: from when
    a worker is free it analyses the snapshots as the training writes them; `stop`, an event
    set here when the training ends, tells it to finish) while this process analyses.
    `background_done()`: whether the background stages have finished; from the first
    evaluation after they have, a CPU training runs on every core (_ThreadWidening)."""
    from empirical.train.loop import train_run

    stages: list[Stage] = []
    st = _stage(stages, "train")
    t = time.perf_counter()
    resume = run.last_checkpoint.exists()
    widen = _ThreadWidening(cfg, background_done)
    compared = None
    if pool is not None:  # our compare-qk follows the snapshots once the worker is free
        compared = pool.apply_async(
            _in_second_process, (following_compare_qk_stage, run, root, stop)
        )
    try:
        result = train_run(cfg, run.path, resume=resume, progress=progress, on_eval=widen)
    finally:
        widen.restore()
        if stop is not None:
            stop.set()
    st.seconds, st.status = time.perf_counter() - t, "ok"
    st.detail = (
        f"{cfg.name} seed {cfg.seed}: {result.step} steps"
        + (" (resumed)" if resume else "")
        + widen.note()
    )
    st.links.append(str(run.training_curves.relative_to(root)))
    if pool is None:
        _analysis_stages(run, root, stages, progress)
        return stages
    stages.append(analyze_stage(run, root, progress))
    stages.append(compared.get())
    return stages


class _ThreadWidening:
    """run_training's on_eval for reproduce's training: once `done()` says the background
    stages have finished, the rest of a CPU training runs on every core
    (`os.cpu_count()`; 1 thread while they share the machine). The step is the same, bit for
    bit, on any thread count (tests/test_reproduce.py), so when the switch happens cannot
    change a number; on this project's 2-core CPU 2 threads take 9-17% off a step
    (benchmarks/bench_threads.py). `restore()` puts the count back for the stages after."""

    def __init__(self, cfg, done):
        from empirical.train.engine import resolve_device

        self.done, self.before, self.at = done, None, None
        self.cores = os.cpu_count() or 1
        cpu = resolve_device(cfg.train.device).type == "cpu"
        self.active = done is not None and cpu and self.cores > 1

    def __call__(self, step: int, records) -> None:
        if not self.active or not self.done():
            return
        import torch

        self.active = False  # decided once, when the background is done
        self.before = torch.get_num_threads()
        if self.cores > self.before:
            torch.set_num_threads(self.cores)
            self.at = step
            _say(f"background stages done: training on {self.cores} threads from step {step}")

    def restore(self) -> None:
        if self.at is not None:
            import torch

            torch.set_num_threads(self.before)

    def note(self) -> str:
        return "" if self.at is None else f"; on {self.cores} threads from step {self.at}"


def _independent_stages(root: Path, skip_theory: bool, authors: Path | None, progress: bool):
    """The stages that do not need our training: the theory's and the paper's run's."""
    theory = [] if skip_theory else theory_stages(root)
    return theory, paper_run_stages(authors, root, progress)


def background_workers(cores: int) -> int:
    """Worker processes beside the training process on a machine with `cores` CPU cores:
    1 up to 2 cores (theory, paper's run, then our compare-qk, in turn), 2 on 3-4 (our
    compare-qk need not wait for the theory), 4 from 5 cores on (theory tests, theory report,
    the paper's run and our compare-qk each in its own process, as on a GPU machine)."""
    return 1 if cores <= 2 else 2 if cores <= 4 else 4


def _start_independent(pool, workers: int, root: Path, skip_theory: bool, authors):
    """Submit the independent stages to `pool`; returns (wait, done): wait() waits for them
    and gives (theory stages, paper's run stages), done() says whether they have finished.
    With 4 workers each stage is its own task."""
    if workers < 4:
        job = pool.apply_async(
            _in_second_process, (_independent_stages, root, skip_theory, authors, False)
        )
        return job.get, job.ready
    theory_jobs = (
        []
        if skip_theory
        else [
            pool.apply_async(_in_second_process, (fn, root))
            for fn in (theory_tests_stage, theory_report_stage)
        ]
    )
    paper = pool.apply_async(_in_second_process, (paper_run_stages, authors, root, False))

    def wait():
        return [st for job in theory_jobs for st in job.get()], paper.get()

    def done():
        return all(job.ready() for job in [*theory_jobs, paper])

    return wait, done


def worker_threads(cores: int) -> int:
    """Torch threads of each background process: the cores shared evenly between the training
    process and the background_workers (1 on 2-4 cores; 3 on a 16-core GPU machine)."""
    return max(1, cores // (background_workers(cores) + 1))


def _in_second_process(fn, *args):
    """fn(*args) in a background process (its allocator set as the command's:
    empirical.allocator), on worker_threads torch threads and as many BLAS
    threads (numpy's and scipy's OpenBLAS, limited by threadpoolctl). Unlimited, the BLAS
    starts a thread per core, and on the 2-core CPU it made our run's compare-qk slower and
    took CPU from the training beside it: 86-90 s and 84-87 s of CPU against 55-57 s and 53-54
    s on one BLAS thread (`python benchmarks/bench_allocator.py --run runs/authors/seed0`,
    2026-11-27)."""
    import torch
    from threadpoolctl import threadpool_limits

    from empirical.allocator import retain_freed_memory

    retain_freed_memory()  # as in the command's own process (a spawned one starts without)
    threads = worker_threads(os.cpu_count() or 1)
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        return fn(*args)


PAPER_RUN = "authors_checkpoints"  # the folder of the paper's run under runs/<name>/


def reproduce(
    cfg,
    runs_root: Path,
    skip_theory: bool = False,
    progress: bool = True,
    authors: Path | None = None,
    parallel: bool | None = None,
) -> Path:
    """Run every stage for `cfg` (a RunConfig); returns the path of the report.

    Stages: the theory tests and report; the paper authors' own run, imported from the
    checkpoints folder `authors` (skipped, with a note, where it is absent or None), evaluated
    at every step and analysed; our training of `cfg`, analysed; report.md with this run's and
    the paper's run's paper checks side by side.

    `parallel` (default: on a machine with 2 or more CPU cores): the theory and paper's-run
    stages run in a second process while this one trains (on one thread while they run, on
    every core once they are done: _ThreadWidening; README, Benchmarks), and our run's
    compare-qk there while this one analyses (in a third process where there are 3 or more
    cores, so that it need not wait for the theory); their results are the same as when run
    one after the other.

    Our run directory's writer lock (empirical.run_lock) is taken first and held to the end:
    a second `reproduce` or a `train` of the same run is refused before anything is written.
    The paper's run directory is locked by the import and evaluation that write it
    (import_checkpoints, evaluate_all_steps), in whichever process runs them."""
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

    pool = background = background_done = stop = manager = None
    if parallel and (authors is not None or not skip_theory):
        # more cores: compare-qk of our run need not wait for the theory, and the theory's
        # two stages and the paper's run need not wait for each other (background_workers)
        workers = background_workers(os.cpu_count() or 1)
        spawn = multiprocessing.get_context("spawn")
        pool = spawn.Pool(workers)
        manager = spawn.Manager()  # its Event tells our compare-qk that the training ended
        stop = manager.Event()
        background, background_done = _start_independent(pool, workers, root, skip_theory, authors)
        _say(f"theory and the paper's run: in {workers} more process(es), beside the training")
    else:
        theory, paper = _independent_stages(root, skip_theory, authors, progress)
    try:
        ours = _our_run_stages(cfg, run, root, progress, pool, background_done, stop)
        if background is not None:
            theory, paper = background()  # an error there is raised here
    finally:
        if pool is not None:
            pool.terminate()  # (done by now, unless this process is failing)
            manager.shutdown()
    if skip_theory:
        theory = [Stage("theory tests", "skipped"), Stage("theory report", "skipped")]

    stages = theory + paper + ours
    path = root / "report.md"
    paper_run = theirs if theirs.summary.exists() else None
    path.write_text(render_report(cfg, root, run.path, stages, paper_run))
    _say(f"wrote {path} ({time.perf_counter() - t_all:.0f} s; stage times in its table)")
    return path


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def render_report(
    cfg, root: Path, run_dir: Path, stages: list[Stage], paper_run: RunDir | None = None
) -> str:
    """report.md: the stages, then every claim one run can check, measured on this run and,
    where `paper_run` (the imported authors' run) is given, on the paper's own run."""
    run = RunDir(run_dir)
    summary = _load(run.summary)
    analysis = _load(run.analysis_dir() / RunDir.ANALYSIS_JSON)
    rel = f"seed{cfg.seed}"
    out = [f"# Reproduction report: {cfg.name}, seed {cfg.seed}", ""]
    out += [
        "Made by `python -m empirical reproduce`. Config: "
        f"[`{rel}/{RunDir.CONFIG}`]({rel}/{RunDir.CONFIG}). Claims, commands and multi-seed "
        "values: `paper_checks.md` in the repository. A claim holds only as the paper states "
        "it: a spike at other steps than the paper's is `no (timing)`.",
        "",
    ]
    out += [
        "## Stages",
        "",
        "| stage | status | time | detail | output |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in stages:
        links = ", ".join(f"[{Path(x).name}]({x})" for x in s.links)
        out.append(f"| {s.name} | {s.status} | {s.seconds:.0f} s | {s.detail} | {links} |")
    ours = paper_check_rows(summary, analysis)
    out += ["", "## Paper checks", ""]
    if paper_run is None:
        out += [
            "| claim | paper | measured (this run) | holds |",
            "| --- | --- | --- | --- |",
        ]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in ours]
    else:
        theirs = {
            row[0]: row
            for row in paper_check_rows(
                _load(paper_run.summary), _load(paper_run.analysis_dir() / RunDir.ANALYSIS_JSON)
            )
        }
        out += [
            "The paper's run: the authors' own checkpoints, imported and measured with the same "
            f"code ([{paper_run.name}]({paper_run.name}/)).",
            "",
            "| claim | paper | measured (this run) | holds | the paper's run | holds |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for claim, paper, measured, holds in ours:
            _, _, their_value, their_holds = theirs.get(claim, (claim, paper, "-", "-"))
            out.append(
                f"| {claim} | {paper} | {measured} | {holds} | {their_value} | {their_holds} |"
            )
    breakdown = summary.get("accuracy_by_operand_variable") or {}
    if breakdown:
        out += ["", "## Var-restricted sets by operand variable (this run)", ""]
        for name, cells in breakdown.items():
            text = ", ".join(f"{k} {pct(c['acc'])}" for k, c in cells.items())
            out.append(f"- {name}: {text}")
    figures = sorted(p.relative_to(root) for p in root.rglob("*.png"))
    out += ["", "## Figures", ""] + [f"- [{f}]({f})" for f in figures] + [""]
    return "\n".join(out)
