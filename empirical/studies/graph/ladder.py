"""The seed's ablation ladder on the graph family: each rung (LADDER) trained for each seed,
every final model scored per node and per graph, by the graph's size N and by depth.

    cfg = rung_config(base, "rec_sup_discrete", seed=1)     # the base config, that rung's model
    scores = run_scores(run_dir)                            # cached in RUN_DIR/graph_scores.json
    rows = ladder_rows(scores_by_rung)                      # the table (studies.graph.report)

A run's scores: per evaluation set, nodes and graphs right, by node depth, by graph depth and
by node kind (`node_kind`: a leaf, a copy of one node, or its operations, "+" or "+-"; counts,
so that seeds pool and intervals follow: empirical.report.stats); a copy's gap; and for a rung
with a discrete state, one step of the algorithm (`one_step`: each node from the true values
of the shallower ones, empirical.train.targets.score_targets), which no earlier error reaches.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from pathlib import Path

import torch

from empirical.config.io import ConfigError, to_dict
from empirical.report.files import atomic_write_bytes
from empirical.report.stats import accuracy_interval
from empirical.runs.config import RunConfig
from empirical.runs.load import load_run
from empirical.runs.rundir import RunDir, RunDirError
from empirical.studies.graph.options import LADDER
from empirical.task.eval_sets import load_eval_sets
from empirical.train.loop import train_run
from empirical.train.targets import score_targets

SCORES = "graph_scores.json"
SCORES_FORMAT = 2  # every set's "format" in SCORES: raise it when score_run adds or changes a count
GOAL = 0.995  # the seed's bar: >= 99.5% of nodes right at 4x the trained size
GAP_CAP = 6  # copy_gap counts gaps of 6 and more as one ("6+")
MIN_NODES = 30  # a depth or gap with fewer nodes of a seed is too thin to draw or rank


def rung_config(base: RunConfig, rung: str, seed: int) -> RunConfig:
    """`base` with rung's model (LADDER): a feedforward rung drops the recurrent settings; a
    recurrent one keeps base.model's recurrence and iterations (base must be recurrent), its
    corruption (model.corruption and how it is applied) only on the rung that asks for it, its
    teacher forcing on the rungs with a discrete state."""
    changes = dict(LADDER[rung][1])
    model = base.model
    if changes.get("recurrence") == "none":
        changes.update(iterations=1, latent_supervision=False, discrete_state=False,
                       corruption=0.0, teacher_forcing=False)  # fmt: skip
    else:
        if not model.recurrent:
            raise ConfigError(
                f"graph-ladder rung {rung!r} is recurrent: the config's model.recurrence must "
                "be 'fixed' or 'depth' (its T for every recurrent rung)"
            )
        corruption = changes.get("corruption", 0.0)
        changes["corruption"] = model.corruption if corruption is None else corruption
        if rung.endswith("corrupt") and not changes["corruption"]:
            raise ConfigError("graph-ladder rung 'rec_sup_discrete_corrupt' needs "
                              "model.corruption > 0 in the config")  # fmt: skip
        # the config's teacher forcing on the rungs with a discrete state (it needs one)
        changes["teacher_forcing"] = model.teacher_forcing and changes["discrete_state"]
    if not changes["corruption"]:  # how the config corrupts: on its corrupting rung only
        changes.update(corrupted_batches=1.0, corruption_scope="all")
    model = dataclasses.replace(model, **changes)
    return dataclasses.replace(base, name=f"{base.name}_{rung}", seed=seed, model=model)


def run_dir_of(out: str | Path, rung: str, seed: int) -> Path:
    return Path(out) / "runs" / rung / f"seed{seed}"


def train_rung(cfg: RunConfig, run_dir: Path, progress: bool = True) -> str:
    """Train cfg in run_dir: 'kept' (finished), 'resumed' or 'trained'. A directory holding
    another config is refused."""
    run = RunDir(run_dir)
    if run.config.is_file() and to_dict(run.read_config()) != to_dict(cfg):
        raise ConfigError(
            f"{run_dir} holds a run of another config; move it away or choose another --out"
        )
    if run.summary.is_file():
        return "kept"
    resume = run.last_checkpoint.is_file()
    train_run(cfg, run_dir, resume=resume, progress=progress, figures=False)
    return "resumed" if resume else "trained"


def node_kind(node) -> str:
    """'leaf', 'copy' (one operand) or the node's operations in order ('+', '-*')."""
    if node.literal is not None:
        return "leaf"
    return "".join(node.ops) if node.ops else "copy"


def copy_gap(nodes, index: int, p: int) -> str | None:
    """For a copy (one operand), the number of nodes defined between its operand's clause and
    its own, as a string ('0': the operand is the node just before; GAP_CAP for that many and
    more); None for other kinds.
    The rule "a node is the latest node's value" is right on every copy at gap 0 and on
    chance (1/p) of the others: a model that fetches by name is flat over the gaps, one that
    leans on recency falls. `p`: the modulus (a name's token id is p + its index)."""
    node = nodes[index]
    if node.literal is not None or len(node.operands) != 1:
        return None
    defined = [n.name for n in nodes[:index]]
    return str(min(len(defined) - 1 - defined.index(p + node.operands[0]), GAP_CAP))


def operand_values(nodes, index: int, p: int) -> str | None:
    """For a node with two or more operands, 'equal' when every operand has the same value,
    else 'distinct'; None for other kinds. On 'equal' nodes the rule "every operand is worth
    the one operand read" (a + a, a - a) is right; with two operands mod an odd p, on them
    alone: a model right on 'distinct' nodes reads both operands. `p`: as for copy_gap."""
    node = nodes[index]
    if node.literal is not None or len(node.operands) < 2:
        return None
    value = {n.name: n.value for n in nodes[:index]}
    return "equal" if len({value[p + o] for o in node.operands}) == 1 else "distinct"


COPY_RULES = {  # the trivial rules a copy's (a node's) accuracy must beat (docs/graph.md)
    "latest": "the latest node's value",
    "mode": "the most frequent value of the earlier nodes (ties: the latest)",
}


def copy_rule_values(nodes, index: int) -> dict[str, int]:
    """What each of COPY_RULES says node `index` (a node with an earlier one) is worth, from
    the values of the nodes before it alone: no name is read."""
    earlier = [n.value for n in nodes[:index]]
    counts = Counter(earlier)
    top = max(counts.values())
    mode = next(v for v in reversed(earlier) if counts[v] == top)
    return {"latest": earlier[-1], "mode": mode}


def _node_readings(vocab, tokens: torch.Tensor, has: torch.Tensor):
    """(node_kind, copy_gap, rules, operand_values) of every labelled position, in the order
    of `correct[has]` (row by row), each row's graph read once; rules: {rule: the rule is
    right} (a leaf: right, its value is in its clause)."""
    kinds, gaps, rules, values = [], [], [], []
    for row, mask in zip(tokens.tolist(), has.tolist(), strict=True):
        nodes = vocab.nodes(row)
        by_position = {}
        for i, n in enumerate(nodes):
            gap = copy_gap(nodes, i, vocab.p)
            right = ({rule: True for rule in COPY_RULES} if n.literal is not None else
                     {rule: v == n.value for rule, v in copy_rule_values(nodes, i).items()})
            values_are = operand_values(nodes, i, vocab.p)
            by_position[n.position] = (node_kind(n), gap, right, values_are)
        for i, m in enumerate(mask):
            if m:
                for readings, reading in zip((kinds, gaps, rules, values), by_position[i],
                                             strict=True):  # fmt: skip
                    readings.append(reading)
    return kinds, gaps, rules, values


def _rule_counts(rules: list, gaps: list) -> dict[str, dict[str, list[int]]]:
    """{rule: {gap: [right, total]}} of the copies (COPY_RULES)."""
    copies = [(r, g) for r, g in zip(rules, gaps, strict=True) if g is not None]
    return {rule: _int_counts(torch.tensor([r[rule] for r, _ in copies], dtype=torch.bool),
                              [g for _, g in copies])
            for rule in COPY_RULES}  # fmt: skip


def _counts(correct, keys) -> dict[str, list[int]]:
    """{key: [right, total]} of the entries (`correct` and `keys` one per entry; a None key
    is left out), in the keys' first-seen order."""
    out: dict[str, list[int]] = {}
    for k, c in zip(keys, correct.tolist(), strict=True):
        if k is None:  # an entry the key does not apply to
            continue
        cell = out.setdefault(k, [0, 0])
        cell[0] += int(c)
        cell[1] += 1
    return out


def _depth_counts(correct: torch.Tensor, depth: torch.Tensor) -> dict[str, list[int]]:
    """{depth: [right, total]} of the entries, by increasing depth."""
    return _int_counts(correct, [str(int(d)) for d in depth.tolist()])


def _int_counts(correct: torch.Tensor, keys: list[str | None]) -> dict[str, list[int]]:
    """_counts with integer keys (as strings: a depth, a gap), by increasing value."""
    return dict(sorted(_counts(correct, keys).items(), key=lambda item: int(item[0])))


@torch.no_grad()
def score_run(run_dir: str | Path, batch_size: int = 100) -> dict:
    """The final model's scores on each evaluation set (module docstring)."""
    run = RunDir(run_dir)
    model, vocab = load_run(run.path)
    sets = load_eval_sets(run.eval_sets)
    out = {}
    for name, batch in sets.items():
        s = score_targets(model, batch, batch_size)
        has = batch.targets >= 0
        graph_depth = batch.target_depths.max(1).values
        rows = s.row_correct()
        kinds, gaps, rules, values = _node_readings(vocab, batch.tokens, has)
        out[name] = {
            "format": SCORES_FORMAT,
            "nodes": [int(s.correct.sum()), int(has.sum())],
            "graphs": [int(rows.sum()), len(batch)],
            "by_node_depth": _depth_counts(s.correct[has], batch.target_depths[has]),
            "by_graph_depth": _depth_counts(rows, graph_depth),
            "by_node_kind": _counts(s.correct[has], kinds),
            "by_operand_values": _counts(s.correct[has], values),
            "by_copy_gap": _int_counts(s.correct[has], gaps),
            "copy_rules_by_gap": _rule_counts(rules, gaps),
            "rules": {rule: [sum(r[rule] for r in rules), len(rules)] for rule in COPY_RULES},
        }
        if model.cfg.recurrent and model.cfg.discrete_state:
            one = score_targets(model, batch, batch_size, one_step=True)
            out[name]["one_step"] = [int(one.correct.sum()), int(has.sum())]
            out[name]["one_step_by_kind"] = _counts(one.correct[has], kinds)
            out[name]["one_step_by_operand_values"] = _counts(one.correct[has], values)
    return out


def run_scores(run_dir: str | Path) -> dict:
    """score_run's result, cached in RUN_DIR/graph_scores.json (made again when the model
    file is newer or the cache is of another SCORES_FORMAT; a run returned without its
    weights, as a lent GPU's packing returns it, is read from the cache alone)."""
    run = RunDir(run_dir)
    path = run.path / SCORES
    try:
        model = run.model_path(None)
    except RunDirError:
        if path.is_file():
            return json.loads(path.read_text())
        raise
    if path.is_file() and path.stat().st_mtime >= model.stat().st_mtime:
        cached = json.loads(path.read_text())
        if all(s.get("format") == SCORES_FORMAT for s in cached.values()):
            return cached
    scores = score_run(run_dir)
    atomic_write_bytes(path, (json.dumps(scores, indent=1) + "\n").encode())
    return scores


# -- over seeds ---------------------------------------------------------------------------------


def _acc(pair) -> float:
    right, total = pair
    return right / total if total else float("nan")


def over_seeds(per_seed: dict[int, list[int]]) -> dict:
    """Accuracies of each seed ({seed: [right, total]}): median, range, the seeds >= GOAL,
    and the pooled Wilson 95% interval (it covers the evaluation sets' sampling, not the
    seeds: the range is the spread over seeds)."""
    accs = {s: _acc(p) for s, p in per_seed.items()}
    right = sum(p[0] for p in per_seed.values())
    total = sum(p[1] for p in per_seed.values())
    values = list(accs.values())
    return {
        "per_seed": accs,
        "totals": {s: p[1] for s, p in per_seed.items()},
        "median": statistics.median(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "at_goal": sum(a >= GOAL for a in values),
        "seeds": len(values),
        "pooled": right / total if total else None,
        "pooled_ci95": list(accuracy_interval(right, total)) if total else None,
    }


def ladder_rows(scores: dict[str, dict[int, dict]]) -> list[dict]:
    """One row per (rung, set): nodes and graphs over seeds. `scores`: rung -> seed -> a
    run's scores."""
    rows = []
    for rung, by_seed in scores.items():
        sets = sorted({n for s in by_seed.values() for n in s},
                      key=lambda n: int(n.removeprefix("graph/n")))  # fmt: skip
        for name in sets:
            have = {seed: s[name] for seed, s in by_seed.items() if name in s}
            rows.append({
                "rung": rung, "set": name, "N": int(name.removeprefix("graph/n")),
                "nodes": over_seeds({seed: s["nodes"] for seed, s in have.items()}),
                "graphs": over_seeds({seed: s["graphs"] for seed, s in have.items()}),
                **({"one_step": over_seeds({seed: s["one_step"] for seed, s in have.items()})}
                   if all("one_step" in s for s in have.values()) else {}),
            })  # fmt: skip
    return rows


def _pooled_by(scores: dict[str, dict[int, dict]], key: str) -> dict[str, dict]:
    """{rung: {value of `key`: {seed: [right, total]}}}: each seed's counts under scores'
    `key` (by_node_depth, by_node_kind, ...) pooled over the evaluation sets; a run scored
    before `key` was counted adds nothing."""
    out: dict[str, dict] = {}
    for rung, by_seed in scores.items():
        pooled = out.setdefault(rung, {})
        for seed, s in by_seed.items():
            for per_set in s.values():
                for value, (right, total) in per_set.get(key, {}).items():
                    cell = pooled.setdefault(value, {}).setdefault(seed, [0, 0])
                    cell[0] += right
                    cell[1] += total
    return out


def kind_rows(scores: dict[str, dict[int, dict]], key: str = "by_node_kind") -> list[dict]:
    """Per rung and node kind (pooled over the sets): accuracy over seeds; runs scored before
    the kinds were counted are left out (`key` "one_step_by_kind": one step's)."""
    return [{"rung": rung, "kind": kind, **over_seeds(pooled[kind])}
            for rung, pooled in _pooled_by(scores, key).items() if pooled
            for kind in sorted(pooled, key=lambda k: (k != "leaf", k != "copy", len(k), k))]


def depth_rows(scores: dict[str, dict[int, dict]], key: str = "by_node_depth",
               field: str = "depth") -> list[dict]:  # fmt: skip
    """Per rung and integer value of `key` (a depth; a copy's gap, `field` "gap"), pooled over
    the sets: accuracy over seeds, the value under `field`."""
    return [{"rung": rung, field: int(value), **over_seeds(pooled[value])}
            for rung, pooled in _pooled_by(scores, key).items()
            for value in sorted(pooled, key=int)]


def _scored_with(scores: dict[str, dict[int, dict]], key: str) -> dict[int, dict] | None:
    """{seed: scores} of the first rung scored with `key` (a rule's counts): every rung of a
    seed is scored on the same sets, so a rule reads the same on each; None if no rung has it."""
    return next((by_seed for by_seed in scores.values()
                 if any(key in ps for s in by_seed.values() for ps in s.values())), None)


def rule_rows(scores: dict[str, dict[int, dict]]) -> list[dict]:
    """Per COPY_RULES rule and copy gap, pooled over the sets: the rule's accuracy over seeds."""
    by_seed = _scored_with(scores, "copy_rules_by_gap")
    if by_seed is None:
        return []
    per_rule = {rule: {seed: {name: {"gaps": ps.get("copy_rules_by_gap", {}).get(rule, {})}
                              for name, ps in s.items()} for seed, s in by_seed.items()}
                for rule in COPY_RULES}  # fmt: skip
    return [{"rule": row.pop("rung"), **row} for row in depth_rows(per_rule, "gaps", "gap")]


def node_rule_rows(scores: dict[str, dict[int, dict]]) -> list[dict]:
    """Per COPY_RULES rule and set, every node: leaves from their clause, the rest by the
    rule; accuracy over seeds, as ladder_rows' "nodes"."""
    by_seed = _scored_with(scores, "rules")
    if by_seed is None:
        return []
    sets = sorted({n for s in by_seed.values() for n in s},
                  key=lambda n: int(n.removeprefix("graph/n")))  # fmt: skip
    return [{"rule": rule, "set": name, "N": int(name.removeprefix("graph/n")),
             **over_seeds({seed: s[name]["rules"][rule] for seed, s in by_seed.items()
                           if "rules" in s.get(name, {})})}
            for rule in COPY_RULES for name in sets]  # fmt: skip
