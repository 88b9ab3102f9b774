#!/usr/bin/env python
"""Figure 3 at the paper's size on one GPU: both panels, under a wall-clock budget.

    python scripts/gpu_fig3.py                   # on the GPU machine, in the repo root
    python scripts/gpu_fig3.py --seeds 0 1 2     # 3 seeds per value (3x the work)

Runs configs/fig3_two_var_frequency_paper.toml and configs/fig3_pair_fraction_paper.toml (20
values each, the authors' configuration, 30 000 steps, seed 0 by default: the paper's one
seed) as two `python -m empirical sweep` processes at the same time on the one GPU, each
training its 20 members as one batched model (train.sample_chunk = 10 from the configs,
evaluation batches of --eval-batch-size). Two processes keep the GPU busy while the other
launches kernels; each panel finishes on its own, so one can finish when the other cannot.

Wall-clock guard: every training process is stopped (SIGTERM) at --budget seconds after
this script started, minus --reserve seconds kept for the summaries and copying. A stopped
panel keeps every member's last checkpoint (every 2 000 steps): the same command started
again on the same machine resumes it (finished members are skipped). A panel that fails for
another reason is started once more (it resumes), without train.compile if that was set.

Output under $OUT (else --out): per panel its results.json, summary.md and figure (the
finished members; threshold with its uncertainty and each accuracy's binomial interval),
sweep.toml, the log, and every member's config.toml / metrics.jsonl / summary.json (no
checkpoints or evaluation sets: they stay in --runs); progress.md (each member's last
evaluation, finished or not) and timings.json. Prints the timings and thresholds.

Quick end-to-end test on a CPU (tests/test_gpu_fig3_script.py, marked slow, does this):
    python scripts/gpu_fig3.py --values 2 --budget 300 --out /tmp/o --runs /tmp/r -- \\
        train.steps=20 train.eval_every=10 train.checkpoint_every=10 task.eval_size=100 \\
        model.d_model=32 model.d_mlp=64 train.batch_size=32 task.p=11 train.sample_chunk=10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from empirical.runs.rundir import RunDir, SweepDir  # noqa: E402  (light: no torch)

PANELS = {
    "two_var_frequency": ROOT / "configs" / "fig3_two_var_frequency_paper.toml",
    "pair_fraction": ROOT / "configs" / "fig3_pair_fraction_paper.toml",
}
SMALL_FILES = (RunDir.CONFIG, RunDir.METRICS, RunDir.SUMMARY, RunDir.CONFIG_HISTORY)
NEEDED = ("torch", "numpy", "scipy", "matplotlib", "tqdm", "tomli_w")


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def preflight() -> None:
    import importlib

    missing = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    import torch

    cuda = torch.cuda.is_available()
    name = torch.cuda.get_device_name(0) if cuda else "no CUDA device: training on the CPU"
    say(f"python {sys.version.split()[0]}, torch {torch.__version__}, {name}")
    if missing:  # scipy only gives the intervals; the rest is needed
        say(f"WARNING: missing modules: {', '.join(missing)}")


def values_subset(config: Path, keep: int) -> list[str]:
    """--param arguments keeping `keep` values spread over the config's grid (0: all)."""
    if not keep:
        return []
    import tomllib

    sweep = tomllib.loads(config.read_text())["sweep"]
    vals = sweep["values"]
    idx = sorted({round(i * (len(vals) - 1) / max(keep - 1, 1)) for i in range(keep)})
    return ["--param", f"{sweep['param']}=" + ",".join(repr(vals[i]) for i in idx)]


class Panel:
    def __init__(self, name: str, args, overrides: list[str]):
        self.name, self.config = name, PANELS[name]
        self.runs = Path(args.runs)
        self.dir = self.runs / name
        self.autocast = args.autocast
        self.log = Path(args.out) / f"{name}.log"
        self.select = ["--seeds", *map(str, args.seeds)] + values_subset(self.config, args.values)
        self.overrides = overrides
        self.proc: subprocess.Popen | None = None
        self.tries: list[dict] = []

    def command(self, compile_mode: str, summarize: bool = False) -> list[str]:
        # run-config overrides first: argparse takes them as the positional arguments
        cmd = [sys.executable, "-m", "empirical", "sweep", *self.overrides]
        cmd += [f"train.compile={compile_mode}", f"train.autocast={self.autocast}"]
        cmd += ["--config", str(self.config.relative_to(ROOT))]  # run in ROOT: no machine path
        cmd += ["--out", str(self.dir), *self.select]
        return cmd + (["--summarize"] if summarize else ["--no-progress"])

    def start(self, compile_mode: str, autocast: str | None = None) -> None:
        if autocast is not None and autocast != self.autocast:
            # autocast is part of a member's config: another setting needs its own directory
            self.autocast = autocast
            self.dir = self.runs / f"{self.name}_{autocast}"
        cmd = self.command(compile_mode)
        self.tries.append(
            {
                "start": time.time(),
                "compile": compile_mode,
                "autocast": self.autocast,
                "command": cmd,
            }
        )
        say(f"{self.name}: start (compile {compile_mode}): {' '.join(cmd[1:])}")
        with open(self.log, "a") as fh:
            fh.write(f"\n=== {' '.join(cmd)}\n")
        log = open(self.log, "a")  # noqa: SIM115 (kept open by the child)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def poll(self) -> int | None:
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is not None:
            self.tries[-1] |= {"end": time.time(), "rc": rc}
            self.tries[-1]["seconds"] = round(self.tries[-1]["end"] - self.tries[-1]["start"], 1)
            self.proc = None
        return rc

    def stop(self) -> None:
        if self.proc is None:
            return
        say(f"{self.name}: time is up: stopping it (members keep their last checkpoint)")
        self.tries[-1]["stopped_by_guard"] = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.poll()


def run_panels(panels: list[Panel], args, deadline: float) -> None:
    """Train the panels (at the same time unless --sequential) until done or the deadline;
    a panel that fails on its own is started once more, with the safe settings (no compile,
    no autocast): resuming its members, or in a directory of its own if autocast changes."""
    queue = list(panels)
    running: list[Panel] = []
    while queue or running:
        while queue and (not running or not args.sequential):
            panel = queue.pop(0)
            if time.time() > deadline - 30:
                say(f"{panel.name}: not started: less than 30 s left")
                continue
            panel.start(args.compile)
            running.append(panel)
        time.sleep(1)
        for panel in list(running):
            rc = panel.poll()
            if rc is None:
                if time.time() >= deadline:
                    panel.stop()
                    running.remove(panel)
                continue
            running.remove(panel)
            if rc == 0:
                say(f"{panel.name}: done in {panel.tries[-1]['seconds']} s")
            elif len(panel.tries) < 2 and time.time() < deadline - 60:
                say(f"{panel.name}: exited with {rc} (see {panel.log}); once more, resuming")
                panel.start("none", "none")
                running.append(panel)
            else:
                say(f"{panel.name}: exited with {rc} (see {panel.log})")


def summarize(panel: Panel, timeout: float) -> None:
    if not SweepDir(panel.dir).members_dir.is_dir():
        return
    cmd = panel.command("none", summarize=True)
    with open(panel.log, "a") as fh:
        fh.write(f"\n=== {' '.join(cmd)}\n")
        fh.flush()
        try:
            subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            say(f"{panel.name}: the summary took over {timeout:.0f} s; skipped")


def progress(panel: Panel) -> list[str]:
    """One markdown row per member: its last evaluation (finished or not)."""
    import tomllib

    metric = tomllib.loads(panel.config.read_text())["sweep"]["metric"]
    rows = []
    members = SweepDir(panel.dir).members_dir
    for d in sorted(members.iterdir()) if members.is_dir() else []:
        run = RunDir(d)
        lines = run.metrics.read_text().splitlines() if run.metrics.exists() else []
        last = json.loads(lines[-1]) if lines else None
        done = run.summary.exists()
        if last is None:
            rows.append(f"| {panel.name} | {d.name} | - | - | no evaluation yet |")
            continue
        acc = last["acc"].get(metric)
        shown = "-" if acc is None else f"{100 * acc:.2f}%"
        rows.append(
            f"| {panel.name} | {d.name} | {last['step']} | {shown} | "
            f"{'finished' if done else 'unfinished'} |"
        )
    return rows


def copy_small(panel: Panel, out: Path) -> None:
    dest = out / panel.name
    dest.mkdir(parents=True, exist_ok=True)
    for path in panel.dir.glob("*"):
        if path.is_file():
            shutil.copy2(path, dest / path.name)
    for member in sorted(SweepDir(panel.dir).members_dir.glob("*")):
        for name in SMALL_FILES + (RunDir.STOPPED,):
            src = member / name
            if src.exists():
                target = SweepDir(dest).member(member.name).path
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / name)


def main(argv: list[str] | None = None) -> int:
    t0 = time.time()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="run-config overrides for every member")
    ap.add_argument("--budget", type=float, default=540, help="seconds for everything (540)")
    ap.add_argument("--reserve", type=float, default=45, help="seconds kept for summaries (45)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (0: the paper's)")
    ap.add_argument("--values", type=int, default=0, help="only K values per panel (0: all 20)")
    ap.add_argument("--panels", nargs="+", choices=list(PANELS), default=list(PANELS))
    ap.add_argument("--sequential", action="store_true", help="one panel after the other")
    ap.add_argument("--compile", default="none", help="train.compile (none, default, ...)")
    ap.add_argument("--autocast", default="none", help="train.autocast (none or bf16)")
    ap.add_argument("--eval-batch-size", type=int, default=32768)
    ap.add_argument("--runs", default=str(ROOT / "runs" / "gpu_fig3"), help="sweep dirs")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "runs" / "gpu_fig3_out"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    Path(args.runs).mkdir(parents=True, exist_ok=True)
    preflight()
    overrides = [
        f"train.eval_batch_size={args.eval_batch_size}",
        *args.overrides,
    ]
    panels = [Panel(name, args, overrides) for name in args.panels]
    deadline = t0 + args.budget - args.reserve
    say(f"training until {time.strftime('%H:%M:%S', time.localtime(deadline))} at the latest")
    run_panels(panels, args, deadline)
    t_train = time.time()
    rows = []
    for panel in panels:
        left = max(10.0, t0 + args.budget - time.time() - 5)
        summarize(panel, timeout=left / max(1, len(panels)))
        rows += progress(panel)
        copy_small(panel, out)
    table = ["| panel | member | last step | metric | state |", "| --- | --- | --- | --- | --- |"]
    (out / "progress.md").write_text("\n".join(table + rows) + "\n")
    timings = {
        "budget_s": args.budget,
        "training_s": round(t_train - t0, 1),
        "total_s": round(time.time() - t0, 1),
        "sequential": args.sequential,
        "seeds": args.seeds,
        "overrides": overrides,
        "panels": {p.name: p.tries for p in panels},
    }
    (out / "timings.json").write_text(json.dumps(timings, indent=2))
    say(f"training {timings['training_s']} s, total {timings['total_s']} s")
    for panel in panels:
        for t in panel.tries:
            say(
                f"{panel.name}: rc {t.get('rc')} after {t.get('seconds')} s (compile "
                f"{t['compile']}, autocast {t['autocast']}"
                f"{', stopped by the guard' if t.get('stopped_by_guard') else ''})"
            )
        results = panel.dir / "results.json"
        if results.exists():
            res = json.loads(results.read_text())
            from empirical.experiments.sweep.summary_md import (
                threshold_sentence,
                uncertainty_sentence,
            )

            say(f"{panel.name}: {len(res['members'])} finished members; {threshold_sentence(res)}")
            if uncertainty_sentence(res):
                say(f"{panel.name}: {uncertainty_sentence(res)}")
            if res["missing_members"]:
                say(f"{panel.name}: unfinished: {', '.join(res['missing_members'])}")
    print("\n".join(table + rows), flush=True)
    failed = [p for p in panels if not p.tries or p.tries[-1].get("rc") not in (0, -15)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
