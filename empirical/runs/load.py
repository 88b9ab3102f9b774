"""A run's model and results as data: the model with its tokenizer, its metrics as a table,
its summary and analysis as typed dicts.

    from empirical.runs.load import load_run, load_metrics, load_summary, load_analysis
    model, vocab = load_run("runs/authors/seed0")  # eval mode; step=N: a snapshot; device=
    df = load_metrics("runs/authors/seed0")       # pandas DataFrame, one row per evaluation
    summary = load_summary("runs/authors/seed0")  # summary.json (RunSummary)
    analysis = load_analysis("runs/authors/seed0")  # analysis/analysis.json (RunAnalysis)

`load_metrics` has one column per number: METRIC_COLUMNS, then `acc/<set>` and `loss/<set>`
(a list of dicts with the same keys without pandas). The summary and the analysis are the
JSON files as written; RunSummary, Phases, Spike and RunAnalysis document their keys.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

from empirical.model.checkpoint import CheckpointError, check_depth, load_model
from empirical.model.transformer import AssignAddTransformer
from empirical.runs.rundir import RunDir, RunDirError
from empirical.task.registry import family_of
from empirical.task.vocab import Vocabulary

# the columns of load_metrics before the per-set ones, in this order
METRIC_COLUMNS = ("step", "train_loss", "lr", "elapsed_s", "full_eval", "eval_n")
# the per-set tables of a metrics record, flattened to `<table>/<set>` columns
PER_SET_TABLES = ("acc", "loss")


class Spike(TypedDict, total=False):
    """One detected phase change (empirical.runs.phases.Rise): the window of the rise and
    its largest one-evaluation jump."""

    start_step: int  # first step of the spike's window
    end_step: int  # last step of the window
    gain: float  # accuracy gained inside it
    reached_90_step: int | None  # first evaluation at >= 90%
    jump_start_step: int | None  # the consecutive pair of evaluations with the largest
    jump_end_step: int | None  # increase (the spike steps the figures and docs use) ...
    jump_gain: float | None  # ... and that increase
    plateau_step: int | None  # first evaluation from the jump on with 90% of the gain
    rule: str  # "through_90" or "steepest"


class Phases(TypedDict, total=False):
    """summary.json's `phases` (empirical.runs.phases.Phases)."""

    zero_var_learned_step: int | None  # first step with the 0-var sets >= 90%
    first_spike: Spike | None  # variable routing (1var/2var ind and pair sets)
    second_spike: Spike | None  # variables at their restricted position (var, both sets)
    variable_series: str  # what the first spike is detected on
    restricted_series: str  # what the second spike is detected on


class RunSummary(TypedDict, total=False):
    """summary.json of a run (empirical.train.summary.write_summary; `evaluate --all-steps`
    writes the same keys for an imported run)."""

    name: str
    seed: int
    final_step: int
    final_acc: dict[str, float]  # {set: accuracy} at the last evaluation
    final_acc_ci95: dict[str, list[float]]  # {set: [low, high]}, Wilson 95% intervals
    eval_set_sizes: dict[str, int]  # {set: sequences}
    final_loss: dict[str, float]  # {set: mean cross-entropy}
    all_sets_at_least_99: bool
    sets_below_99: dict[str, float]
    first_step_all_sets_at_least_99: int | None
    phases: Phases
    accuracy_by_operand_variable: dict[str, dict[str, dict[str, float]]] | None
    elapsed_s: float | None
    steps_per_s: float | None
    device: str | None
    device_name: str | None
    torch_threads: int
    last_session: dict[str, Any] | None  # where the last session's time went
    config: dict[str, Any]  # the run's RunConfig as a dict


class RunAnalysis(TypedDict, total=False):
    """analysis.json of `python -m empirical analyze` (empirical.analysis.run_analysis;
    every definition in docs/analysis.md)."""

    run_dir: str
    checkpoint: str  # the model file analysed
    step: int  # its step
    seed: int  # the analysis seed (probe data)
    task: dict[str, Any]  # p, K, L, r1, r2
    probe_data: dict[str, Any]  # what the probe sequences are and how many
    model: dict[str, Any]  # every measure of the model: attention, ov_mlp_cosine,
    # same_addition_cosine, isolated_ov_mlp, answer_probes, fourier, qk1_embeddings,
    # qk1_positional_preference, qk2_ov1_identity, progress_measures, second_spike_scores
    accuracy_at_step: dict[str, float] | None
    accuracy_at_step_ci95: dict[str, list[float]] | None
    phases: Phases | None
    measures: dict[str, dict[str, Any]]  # {measure: {threshold, definition}}
    training_dynamics: dict[str, Any] | None  # the measures over every snapshot
    phase2_plateau: dict[str, Any] | None
    definition_agreement: dict[str, Any] | None
    spike_comparisons: dict[str, Any]  # the snapshots before / after each spike
    figures: list[str]  # the figure files written
    seconds: float


def load_run(
    run_dir: str | os.PathLike, step: int | None = None, device: Any = None
) -> tuple[AssignAddTransformer, Vocabulary]:
    """(model, vocab) of the run in `run_dir`: its latest weights (checkpoints/last.pt, else
    the last snapshot) or, with `step`, the snapshot at that step; eval mode, on `device`
    (default: the CPU). `vocab` is the task's tokenizer, the same as `model.vocab`."""
    run = RunDir(run_dir).require_run()
    cfg = run.read_config()
    task = cfg.task
    path = run.model_path(step)
    model = load_model(path, device)
    check_depth(model.cfg.n_layers, cfg.model.n_layers, path, "checkpoint")
    vocab = family_of(task).vocabulary(task)
    sizes = (vocab.d_vocab, vocab.n_classes, vocab.L)
    if sizes != (model.cfg.d_vocab, model.cfg.d_vocab_out, model.cfg.n_ctx):
        raise CheckpointError(
            f"checkpoint {path}: model sizes (d_vocab, d_vocab_out, n_ctx) = "
            f"{(model.cfg.d_vocab, model.cfg.d_vocab_out, model.cfg.n_ctx)} do not match the "
            f"run's task ({task.family}: K={task.K}, L={task.L}, {task.n_classes} classes) which "
            f"needs {sizes}"
        )
    model.attach_vocab(vocab)  # the family's text (a chain task's pointer assignments, ...)
    return model, vocab


def metrics_rows(run: str | os.PathLike | RunDir) -> list[dict[str, Any]]:
    """metrics.jsonl of `run` as flat rows (see the module docstring), one per evaluation;
    [] when the run has no evaluation yet."""
    records = RunDir(run).require_run().read_metrics()
    sets: list[str] = []
    for record in records:
        for table in PER_SET_TABLES:
            sets += [name for name in record.get(table) or {} if name not in sets]
    rows = []
    for record in records:
        subsample = record.get("eval_n")  # {set: sequences read}: only where subsampled
        row: dict[str, Any] = {
            "step": record["step"],
            "train_loss": record.get("train_loss"),
            "lr": record.get("lr"),
            "elapsed_s": record.get("elapsed_s"),
            "full_eval": not subsample,
            "eval_n": sum(subsample.values()) if subsample else None,
        }
        for table in PER_SET_TABLES:
            values = record.get(table) or {}
            row.update({f"{table}/{name}": values.get(name) for name in sets})
        rows.append(row)
    return rows


def load_metrics(run: str | os.PathLike | RunDir, as_frame: bool | None = None):
    """The run's metrics, one row per evaluation: a pandas DataFrame (`as_frame` None: when
    pandas is installed) or a list of dicts with the same keys (`as_frame=False`)."""
    rows = metrics_rows(run)
    if as_frame is False:
        return rows
    try:
        import pandas as pd
    except ImportError:
        if as_frame:
            raise ImportError(
                'load_metrics(as_frame=True) needs pandas: pip install -e ".[analysis]" '
                "(or call it with as_frame=False for a list of dicts)"
            ) from None
        return rows
    columns = list(rows[0]) if rows else list(METRIC_COLUMNS)
    return pd.DataFrame(rows, columns=columns)


def load_summary(run: str | os.PathLike | RunDir) -> RunSummary:
    """The run's summary.json (RunSummary): final accuracies with intervals, the detected
    phases, timing and the config; an error naming the file if the run has none yet."""
    return RunDir(run).require_run().read_summary()  # type: ignore[return-value]


def load_analysis(run: str | os.PathLike | RunDir, step: int | None = None) -> RunAnalysis:
    """The analysis.json that `python -m empirical analyze RUN [--step S]` wrote (RunAnalysis):
    of the final model, or of the snapshot at `step`."""
    run = RunDir(run).require_run()
    path = run.analysis_dir(step) / RunDir.ANALYSIS_JSON
    again = f"python -m empirical analyze {run.path}"
    again += f" --step {step}" if step is not None else ""
    if not path.is_file():
        raise RunDirError(f"{path}: no analysis there; write it with `{again}`")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: unreadable ({exc}); write it again with `{again}`") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: not an analysis (a JSON {type(data).__name__})")
    return data  # type: ignore[return-value]
