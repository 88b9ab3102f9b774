"""The graph family (task.family = "graph", empirical/task/graph): arithmetic mod p on random
computational graphs, every node's value a label at the position of its name.

`sample`'s printed text is read back by a resolver written here (plain Python over the text,
not the family's tokenizer) that recomputes every node's value; each row's targets, depths,
label and offset are checked against a plain reading of its ids; the data is a function of the
seed; bad values are one-line errors naming the field; `train` runs on a tiny config and logs
per-node and per-graph accuracies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from disentangled.errors import UsageError
from empirical.config.io import ConfigError, to_dict
from empirical.runs.config import load_run_config
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_set, eval_set_names
from empirical.task.pairs import training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import run_training_sampler

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "graph.toml"


def graph_task(**changes):
    task = load_run_config(CONFIG).task
    return task_config(**{**task.__dict__, **changes})


# -- an independent resolver of the printed text -----------------------------------------------


def resolve_text(line: str, p: int) -> tuple[list[tuple[str, int, int]], dict[str, int]]:
    """([(name, value, depth)] in definition order, {name: printed label}) of one `sample`
    line: clauses `v -> x;` or `x op x ... -> x;` (left to right, mod p), then `x=v` labels."""
    text, _, labels = line.rpartition(";")
    values, depths, out = {}, {}, []
    for clause in text.split(";"):
        lhs, arrow, name = clause.strip().rpartition(" -> ")
        assert arrow and name not in values, clause
        words = lhs.split()
        if len(words) == 1 and words[0].isdigit():
            value, depth = int(words[0]), 0
            assert 0 <= value < p
        else:
            value, depth = values[words[0]], depths[words[0]]
            for op, operand in zip(words[1::2], words[2::2], strict=True):
                b = values[operand]
                value = {"+": value + b, "-": value - b, "*": value * b}[op] % p
                depth = max(depth, depths[operand])
            depth += 1
        values[name], depths[name] = value, depth
        out.append((name, value, depth))
    printed = dict(item.split("=") for item in labels.split())
    return out, {k: int(v) for k, v in printed.items()}


def _sample(*args: str) -> list[str]:
    """`python -m empirical sample --config configs/graph.toml ARGS`'s lines (in-process: the
    command's own options and rendering)."""
    from empirical.cli.sample import render
    from empirical.config.options import parse_options
    from empirical.runs.options import SampleOptions

    return render(parse_options(SampleOptions, ["--config", str(CONFIG), *args])).splitlines()


def test_an_independent_resolver_of_samples_text_gives_every_label():
    lines = _sample("--split", "graph/n12", "--n", "30") + _sample("--n", "30", "--seed", "3")
    assert len(lines) == 60
    ops_seen = set()
    for line in lines:
        nodes, printed = resolve_text(line, 23)
        assert [n for n, _, _ in nodes] == list(printed), line  # every node labelled, in order
        assert all(printed[n] == v for n, v, _ in nodes), line
        ops_seen |= {w for w in line.split() if w in "+-*"}
    assert ops_seen == {"+", "-", "*"}
    assert all(len(resolve_text(line, 23)[0]) == 12 for line in lines[:30])  # graph/n12: N = 12


def test_the_resolver_can_fail():
    nodes, printed = resolve_text("3 -> x1; 5 -> x2; x1 * x2 - x2 -> x7; x1=3 x2=5 x7=11", 23)
    assert [v for _, v, _ in nodes] == [3, 5, 10] and printed["x7"] == 11  # 3*5-5 = 10, not 11
    assert [d for _, _, d in nodes] == [0, 0, 1]


# -- the rows: a plain reading of the ids --------------------------------------------------------


def read_ids(ids: list[int], p: int, K: int) -> list[dict]:
    """Every clause of a row from its ids (values < p, names p..p+K-1, then `->`, `;`, `+`,
    `-`, `*`, `pad`): its name's position, value, depth."""
    arrow, sep, plus, pad = p + K, p + K + 1, p + K + 2, p + K + 5
    nodes, seen, clause, start = [], {}, [], 0
    for pos, t in enumerate(ids):
        if t == pad:
            assert all(u == pad for u in ids[pos:]) and not clause
            break
        if t != sep:
            clause.append(t)
            continue
        assert clause[-2] == arrow
        body, name = clause[:-2], clause[-1]
        if len(body) == 1 and body[0] < p:
            value, depth = body[0], 0
        else:
            value, depth = seen[body[0]]
            for op, x in zip(body[1::2], body[2::2], strict=True):
                b, d = seen[x]
                value = [value + b, value - b, value * b][op - plus] % p
                depth = max(depth, d)
            depth += 1
        seen[name] = (value, depth)
        nodes.append({"position": start + len(clause) - 1, "value": value, "depth": depth})
        clause, start = [], pos + 1
    return nodes


def check_rows(batch, task, width: int) -> list[list[dict]]:
    assert batch.tokens.shape == (len(batch), width)
    rows = []
    for i in range(len(batch)):
        nodes = read_ids(batch.tokens[i].tolist(), task.p, task.K)
        targets = torch.full((width,), -1)
        depths = torch.full((width,), -1)
        for n in nodes:
            targets[n["position"]], depths[n["position"]] = n["value"], n["depth"]
        assert torch.equal(batch.targets[i], targets)
        assert torch.equal(batch.target_depths[i], depths)
        assert batch.labels[i] == nodes[-1]["value"] and batch.n_vars[i] == len(nodes)
        rows.append(nodes)
    return rows


def test_training_rows_are_graphs_of_the_trained_sizes_at_random_offsets():
    task = graph_task()
    batch = run_training_sampler(task, 0).sample(300, training_generator(0))
    rows = check_rows(batch, task, task.train_length)
    sizes = {len(r) for r in rows}
    assert sizes == set(range(task.graph_min_nodes, task.graph_max_nodes + 1))
    off = batch.pos_offset
    assert int(off.min()) >= 0 and int(off.max()) <= task.L - 1
    # every positional row is trained about equally often (rows wrap around after L - 1)
    rows = (off[:, None] + torch.arange(task.train_length)) % task.L
    cover = torch.bincount(rows.reshape(-1), minlength=task.L).double()
    assert cover.min() > 0.5 * cover.mean()
    again = run_training_sampler(task, 0).sample(300, training_generator(0))
    assert batch.equal(again)
    other = run_training_sampler(task, 1).sample(300, training_generator(1))
    assert not torch.equal(batch.tokens, other.tokens)
    fixed = run_training_sampler(graph_task(graph_shift=False), 0).sample(20, training_generator(0))
    assert int(fixed.pos_offset.abs().sum()) == 0


def test_a_least_operand_count_draws_computed_nodes_with_that_many():
    """graph_min_operands: every computed node with that many earlier nodes has at least that
    many operands (no copies at 2); the default keeps the draws as they were."""
    task = graph_task(graph_min_operands=2, graph_max_operands=3, eval_size=60)
    batch, _ = build_eval_set(task, 0, "graph/n12")
    vocab = family_of(task).vocabulary(task)
    counts = set()
    for row in batch.tokens.tolist():
        for i, node in enumerate(vocab.nodes(row)):
            if node.literal is None:
                assert len(node.operands) >= min(2, i), (i, node)
                counts.add(len(node.operands))
    assert counts == {1, 2, 3}  # 1: only node 1, which has one node before it
    plain, _ = build_eval_set(graph_task(eval_size=60), 0, "graph/n12")
    same, _ = build_eval_set(graph_task(eval_size=60, graph_min_operands=1), 0, "graph/n12")
    assert plain.equal(same)
    assert "graph_min_operands" not in to_dict(graph_task())  # saved only when set


def test_leading_leaves_make_the_first_nodes_leaves_and_keep_the_default_draws():
    """graph_leading_leaves: the first k nodes of every graph are leaves (the seed's graphs
    start with 6); the later ones are drawn as before; the default (1) keeps the draws."""
    task = graph_task(graph_leading_leaves=3, graph_min_nodes=4, eval_size=60)
    batch, _ = build_eval_set(task, 0, "graph/n12")
    vocab = family_of(task).vocabulary(task)
    first = [[n.literal is not None for n in vocab.nodes(row)] for row in batch.tokens.tolist()]
    assert all(all(row[:3]) for row in first)
    assert not all(row[3] for row in first)  # a node after them may be computed
    plain, _ = build_eval_set(graph_task(eval_size=60), 0, "graph/n12")
    same, _ = build_eval_set(graph_task(eval_size=60, graph_leading_leaves=1), 0, "graph/n12")
    assert plain.equal(same)
    assert "graph_leading_leaves" not in to_dict(graph_task())  # saved only when set


def test_evaluation_sets_hold_graphs_of_their_size_at_the_natural_positions():
    task = graph_task(eval_size=40)
    assert eval_set_names(task) == ("graph/n6", "graph/n12", "graph/n24", "graph/n48")
    depth = {}
    for name in eval_set_names(task):
        batch, whole = build_eval_set(task, 0, name)
        assert not whole and len(batch) == 40 and int(batch.pos_offset.abs().sum()) == 0
        rows = check_rows(batch, task, task.L)
        N = int(name.removeprefix("graph/n"))
        assert {len(r) for r in rows} == {N}
        depth[N] = sum(max(n["depth"] for n in r) for r in rows) / len(rows)
        assert batch.equal(build_eval_set(task, 0, name)[0])
    assert depth[6] < depth[12] < depth[24] < depth[48]  # larger graphs are deeper


def test_the_vocabulary_reads_and_writes_its_text():
    task = graph_task()
    vocab = family_of(task).vocabulary(task)
    ids = vocab.encode("3 -> x1; 5 -> x2; x1 * x2 - x2 -> x7;")
    assert vocab.decode(ids) == "3 -> x1; 5 -> x2; x1 * x2 - x2 -> x7;"
    nodes = vocab.nodes(ids)
    assert [(n.value, n.depth, n.position) for n in nodes] == [(3, 0, 2), (5, 0, 6), (10, 1, 14)]
    assert vocab.d_vocab == task.p + task.K + 6 == vocab.pad + 1
    assert vocab.encode(vocab.decode_tokens(ids)).equal(ids)
    for bad, why in [
        ("x1 -> x2;", "expected earlier names"),
        ("3 -> x1; 4 -> x1;", "x1 defined twice"),
        ("3 -> x1; x1 + -> x2;", "may not end in an operation"),
        ("3 -> x1", "no `;`"),
        ("3 -> y1;", "is not a token"),
    ]:
        with pytest.raises(ValueError, match=why):
            vocab.encode(bad)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"graph_min_nodes": 1}, "task.graph_min_nodes = 1 is out of range: must be an integer"),
        ({"graph_max_nodes": 3, "graph_min_nodes": 4}, "task.graph_max_nodes = 3 is below"),
        ({"graph_operations": ["+", "/"]}, "task.graph_operations: '/' is not an operation"),
        ({"graph_operations": []}, "task.graph_operations = [] must list one or more"),
        ({"graph_eval_nodes": [1, 6]}, "task.graph_eval_nodes: 1 is not a node count"),
        ({"K": 40}, "task.K = 40 variable names are too few: a graph of 48 nodes"),
        ({"L": 100}, "task.L = 100 is too short: a graph of 48 nodes"),
        ({"graph_max_operands": 4}, "task.graph_max_operands = 4 is out of range"),
        ({"graph_max_operands": 2, "graph_min_operands": 3},
         "task.graph_min_operands = 3 is above task.graph_max_operands = 2"),
        ({"graph_leaf_share": 1.0}, "task.graph_leaf_share = 1.0 must be a number in [0, 1)"),
        ({"graph_leading_leaves": 0}, "task.graph_leading_leaves = 0 is out of range"),
        ({"graph_leading_leaves": 2},
         "task.graph_leading_leaves = 2 leaves no computed node in a graph of 2 nodes"),
        ({"lego_hops": [1]}, "task.lego_hops = (1,) is a setting of the lego family"),
    ],
)  # fmt: skip
def test_bad_values_are_one_line_errors_naming_the_field(changes, message):
    with pytest.raises(ConfigError) as err:
        graph_task(**changes)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_bad_value_on_the_command_line_is_an_error_line_and_status_2():
    cmd = [sys.executable, "-m", "empirical", "sample", "--config", str(CONFIG),
           "task.graph_operations=+,/"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.startswith("error: task.graph_operations")
    assert done.stderr.count("\n") == 1


def test_the_ladder_keeps_how_the_config_corrupts_on_its_corrupting_rung_only():
    from empirical.studies.graph.ladder import rung_config

    base = load_run_config(CONFIG, ["model.teacher_forcing=true", "model.corrupted_batches=0.05",
                                    "model.corruption_scope=last"])  # fmt: skip
    full = rung_config(base, "rec_sup_discrete_corrupt", 1).model
    assert (full.corruption, full.corrupted_batches, full.corruption_scope) == (0.1, 0.05, "last")
    for rung in ("ff2", "rec", "rec_sup_discrete"):
        model = rung_config(base, rung, 1).model
        assert (model.corruption, model.corrupted_batches, model.corruption_scope) == (
            0.0, 1.0, "all")


# -- training, the ladder and the mechanism on one tiny ladder --------------------------------

TINY = [
    "task.K=12", "task.L=46", "task.graph_max_nodes=4", "task.graph_eval_nodes=[4,8]",
    "task.graph_max_operands=2", "task.graph_operations=+,-", "task.eval_size=20",
    "model.d_model=16", "model.n_heads=2", "model.d_mlp=16", "train.steps=4",
    "train.batch_size=8", "train.eval_every=2", "train.checkpoint_every=2",
    "train.eval_subsample=0", "train.eval_batch_size=7",
]  # fmt: skip
RUNGS = ("ff2", "rec_sup_discrete_corrupt")


@pytest.fixture(scope="module")
def tiny_ladder(tmp_path_factory):
    """graph-ladder with two rungs, one seed, 4 steps each (in-process: no interpreter start)."""
    from empirical.config.options import parse_options
    from empirical.studies.graph.commands import run
    from empirical.studies.graph.options import GraphLadderOptions

    out = tmp_path_factory.mktemp("ladder")
    opts = parse_options(GraphLadderOptions, ["--config", str(CONFIG), "--seeds", "0",
                                              "--variants", ",".join(RUNGS), "--out", str(out),
                                              "--no-progress", *TINY])  # fmt: skip
    assert run(opts) == 0
    return out


def test_train_logs_accuracy_per_node_and_per_graph(tiny_ladder):
    run = tiny_ladder / "runs" / "rec_sup_discrete_corrupt" / "seed0"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 2, 4]
    last = records[-1]
    assert set(last["acc"]) == set(last["row_acc"]) == {"graph/n4", "graph/n8"}
    for name, acc in last["acc"].items():
        assert 0 <= last["row_acc"][name] <= acc <= 1  # a graph is right when all its nodes are
    cfg = load_run_config(run / "config.toml")
    assert cfg.model.recurrence == "depth" and cfg.model.corruption == 0.1
    assert (run / "summary.json").is_file()


def test_the_ladder_table_counts_every_node_and_graph(tiny_ladder):
    result = json.loads((tiny_ladder / "ladder.json").read_text())
    assert result["rungs"] == list(RUNGS) and result["seeds"] == [0]
    assert [(r["rung"], r["N"]) for r in result["rows"]] == [
        (rung, n) for rung in RUNGS for n in (4, 8)
    ]
    scores = json.loads((tiny_ladder / "runs" / "ff2" / "seed0" / "graph_scores.json").read_text())
    n8 = scores["graph/n8"]
    assert n8["nodes"][1] == 20 * 8 and n8["graphs"][1] == 20
    assert sum(t for _, t in n8["by_node_depth"].values()) == 20 * 8
    assert sum(r for r, _ in n8["by_node_depth"].values()) == n8["nodes"][0]
    row = next(r for r in result["rows"] if r["rung"] == "ff2" and r["N"] == 8)
    assert row["nodes"]["median"] == n8["nodes"][0] / 160
    low, high = row["nodes"]["pooled_ci95"]
    assert low <= row["nodes"]["pooled"] <= high
    kinds = n8["by_node_kind"]  # every node counted once, by its kind
    assert sum(t for _, t in kinds.values()) == 20 * 8 and "leaf" in kinds
    assert sum(r for r, _ in kinds.values()) == n8["nodes"][0]
    assert set(kinds) <= {"leaf", "copy", "+", "-", "*", "++", "+-", "-+", "--"}
    gaps = n8["by_copy_gap"]  # every copy counted once, by its gap
    assert sum(t for _, t in gaps.values()) == kinds.get("copy", [0, 0])[1]
    for by_gap in n8["copy_rules_by_gap"].values():  # the rules see every copy
        assert {g: t for g, (_, t) in by_gap.items()} == {g: t for g, (_, t) in gaps.items()}
    assert {r["rule"] for r in result["gap_rule_rows"]} == {"latest", "mode"}
    leaves = kinds["leaf"][1]  # the node rules: leaves right, the rest by the rule
    assert all(t == 20 * 8 and r >= leaves for r, t in n8["rules"].values())
    rec = json.loads((tiny_ladder / "runs" / "rec_sup_discrete_corrupt" / "seed0" /
                      "graph_scores.json").read_text())["graph/n8"]  # fmt: skip
    assert rec["one_step"][1] == 20 * 8 and "one_step" not in n8  # a discrete state's only
    assert sum(t for _, t in rec["one_step_by_kind"].values()) == 20 * 8
    values = n8["by_operand_values"]  # every node of two or more operands, once
    operations = sum(t for k, (_, t) in kinds.items() if k not in ("leaf", "copy"))
    assert sum(t for _, t in values.values()) == operations and set(values) <= {"equal",
                                                                               "distinct"}
    assert rec["one_step_by_operand_values"].keys() == rec["by_operand_values"].keys()
    text = (tiny_ladder / "ladder.md").read_text()
    assert "| ff2 | 8 | 2x |" in text and "seeds >= 99.5%" in text
    assert "## One step of the algorithm" in text
    assert "*rule: the latest node's value*" in text
    assert "| *rule: leaves read, other nodes the most frequent earlier value* | 8 | 2x |" in text
    assert "by the node's kind" in text and "`leaf`" in text
    assert operations  # the tiny task draws them
    assert "## Nodes with two or more operands, by their operands' values" in text
    assert (tiny_ladder / "accuracy_by_size.png").stat().st_size > 0


def test_a_cached_score_of_another_format_is_made_again(tiny_ladder, tmp_path):
    import shutil

    from empirical.studies.graph.ladder import SCORES, SCORES_FORMAT, run_scores

    run = tmp_path / "seed0"
    shutil.copytree(tiny_ladder / "runs" / "ff2" / "seed0", run)
    cached = json.loads((run / SCORES).read_text())
    assert {s["format"] for s in cached.values()} == {SCORES_FORMAT}
    for older in (True, False):  # marked: a set's counts the scorer would not write
        marked = {name: {**s, "marker": 1} for name, s in cached.items()}
        if older:
            for s in marked.values():
                del s["format"]
        (run / SCORES).write_text(json.dumps(marked))
        scores = run_scores(run)
        assert all(("marker" in s) is not older for s in scores.values())  # older: scored again
        assert json.loads((run / SCORES).read_text()) == scores  # and written


def test_thin_depths_carry_their_counts_and_are_marked(tiny_ladder):
    """Each depth row holds every seed's node count; a depth with fewer than MIN_NODES nodes
    is marked (n ...) in ladder.md, and the figure would leave it out."""
    from empirical.studies.graph.ladder import MIN_NODES
    from empirical.studies.graph.report import _thin

    result = json.loads((tiny_ladder / "ladder.json").read_text())
    rows = [r for r in result["depth_rows"] if r["rung"] == "ff2"]
    scores = json.loads((tiny_ladder / "runs" / "ff2" / "seed0" / "graph_scores.json").read_text())
    pooled = {}
    for per_set in scores.values():
        for depth, (_, total) in per_set["by_node_depth"].items():
            pooled[int(depth)] = pooled.get(int(depth), 0) + total
    assert {r["depth"]: r["totals"]["0"] for r in rows} == pooled
    thin = [r for r in rows if r["totals"]["0"] < MIN_NODES]
    assert thin, "20 graphs a set leave some depth thin"
    assert all(_thin(r, "0") for r in thin)
    assert not any(_thin(r, "0") for r in rows if r not in thin)
    text = (tiny_ladder / "ladder.md").read_text()
    assert f"(n {thin[0]['totals']['0']})" in text


def test_the_mechanism_reads_each_iteration(tiny_ladder, tmp_path):
    from empirical.config.options import parse_options
    from empirical.studies.graph.mechanism_command import run
    from empirical.studies.graph.options import GraphMechanismOptions

    run_dir = tiny_ladder / "runs" / "rec_sup_discrete_corrupt" / "seed0"
    opts = parse_options(GraphMechanismOptions, [str(run_dir), "--n", "20", "--out",
                                                 str(tmp_path), "--no-figures"])  # fmt: skip
    assert run(opts) == 0
    result = json.loads((tmp_path / "graph_mechanism.json").read_text())
    share = result["heads"]["share"]  # [iteration][layer][head][slot]
    assert len(share) == result["iterations"] and len(share[0]) == 2 and len(share[0][0]) == 2
    assert all(abs(sum(s) - 1) < 1e-6 for t in share for layer in t for s in layer)
    fetch = result["fetch"]  # attention weights: in [0, 1], one per layer and head
    assert fetch["operands"] > 0 and len(fetch["operand"]) == 2 and len(fetch["operand"][0]) == 2
    assert all(0 <= w <= 1 for k in ("operand", "latest", "other") for layer in fetch[k]
               for w in layer)  # fmt: skip
    assert set(result["mlp"]) == {"+", "-"}
    for m in result["mlp"].values():
        parts = m["input"]["dc"] + m["input"]["diagonal"] + m["input"]["rest"]
        assert abs(parts - 1) < 1e-9
    with pytest.raises(UsageError, match="reads a recurrent model"):
        parse_options(GraphMechanismOptions, [str(tiny_ladder / "runs" / "ff2" / "seed0")])


def test_the_fetch_table_reads_where_a_name_is_looked_up(tiny_ladder):
    """fetch_attention on a model whose every head attends from each position to the first
    position holding the same token (a name's definition precedes its uses): from an operand's
    occurrence all attention is on its definition, from the node none is (its name's first
    occurrence is the node itself)."""
    from empirical.runs.load import load_run
    from empirical.studies.graph.mechanism import fetch_attention
    from empirical.task.eval_sets import load_eval_sets

    run_dir = tiny_ladder / "runs" / "rec_sup_discrete_corrupt" / "seed0"
    model, vocab = load_run(run_dir)
    batch = load_eval_sets(run_dir / "eval_sets.pt")["graph/n8"][:20]
    same = batch.tokens[:, :, None] == batch.tokens[:, None, :]  # [row, query, key]
    first = same.int().argmax(-1)  # each query's token's first position
    oracle = torch.nn.functional.one_hot(first, batch.tokens.shape[1]).float()

    def duplicate_token(pattern, hook):
        return oracle[:, None].expand_as(pattern).clone()

    model.ensure_iterations(int(batch.target_depths.max()) + 1)
    for name in model.hook_dict:
        if name.endswith("attn.hook_pattern"):
            model.add_hook(name, duplicate_token)
    fetch = fetch_attention(model, vocab, batch)
    model.reset_hooks()
    flat = {k: [w for layer in fetch[k] for w in layer] for k in fetch if k != "operands"}
    assert all(abs(w - 1) < 1e-6 for w in flat["at_use_operand"])
    assert all(w < 1e-6 for k in ("at_use_other", "operand", "latest", "other") for w in flat[k])


def test_a_copys_gap_counts_the_nodes_defined_between_its_operand_and_it():
    from empirical.studies.graph.ladder import copy_gap
    from empirical.task.graph.vocab import GraphVocabulary

    vocab = GraphVocabulary(23, 8, 40)
    ids = vocab.encode("5 -> x1; 7 -> x2; x1 -> x3; x3 -> x4; x1 + x2 -> x5; x2 -> x6;")
    nodes = vocab.nodes(ids.tolist())
    assert [copy_gap(nodes, i, 23) for i in range(len(nodes))] == [None, None, "1", "0", None, "3"]
    text = "1 -> x0; " + " ".join(f"2 -> x{i};" for i in range(1, 9)) + " x0 -> x9;"
    long = GraphVocabulary(23, 12, 60).encode(text)
    assert copy_gap(GraphVocabulary(23, 12, 60).nodes(long.tolist()), 9, 23) == "6"  # 8: "6+"


def test_operand_values_split_the_nodes_the_one_operand_rule_gets_right():
    """'equal' when every operand has one value (a + a = 2a: the rule reading one operand is
    right), 'distinct' otherwise; None for leaves and copies."""
    from empirical.studies.graph.ladder import operand_values
    from empirical.task.graph.vocab import GraphVocabulary, apply

    vocab = GraphVocabulary(23, 8, 60)
    ids = vocab.encode("5 -> x1; x1 -> x2; 7 -> x3; x1 + x2 -> x4; x2 - x3 -> x5;")
    nodes = vocab.nodes(ids.tolist())
    assert [operand_values(nodes, i, 23) for i in range(5)] == [None, None, None, "equal",
                                                                "distinct"]
    a, b = nodes[3], nodes[4]  # the rule: the operation on the second operand's value alone
    assert apply("+", 5, 5, 23) == a.value and apply("-", 7, 7, 23) != b.value


def test_the_copy_rules_read_the_earlier_values_only():
    """'latest': the node just before; 'mode': the most frequent earlier value, ties to the
    latest; both right on the copy below only when the value they name is the copy's."""
    from empirical.studies.graph.ladder import copy_rule_values
    from empirical.task.graph.vocab import GraphVocabulary

    vocab = GraphVocabulary(23, 12, 46)
    ids = vocab.encode("5 -> x1 ; 7 -> x2 ; 5 -> x3 ; x2 -> x4 ; x1 -> x5 ;")
    nodes = vocab.nodes(ids.tolist())
    assert copy_rule_values(nodes, 4) == {"latest": 7, "mode": 7}  # 5 and 7 twice: 7 latest
    assert copy_rule_values(nodes, 3) == {"latest": 5, "mode": 5}  # 5 twice, 7 once
    assert nodes[4].value == 5 and nodes[3].value == 7  # so both rules miss both copies


def test_the_mechanism_needs_a_node_whose_operands_can_be_renamed():
    from types import SimpleNamespace

    from empirical.studies.graph.mechanism import renamable
    from empirical.task.graph.vocab import GraphVocabulary

    vocab = GraphVocabulary(23, 8, 40)
    three = vocab.encode("5 -> x1; 7 -> x2; x1 + x2 -> x3;")  # both earlier names are operands
    four = vocab.encode("5 -> x1; 7 -> x2; 1 -> x4; x1 + x2 -> x3;")
    assert not renamable(vocab, SimpleNamespace(tokens=three[None]))
    assert renamable(vocab, SimpleNamespace(tokens=four[None]))


def test_a_relative_position_model_has_no_position_factor():
    import dataclasses

    from empirical.model.config import ModelConfig
    from empirical.model.transformer import AssignAddTransformer
    from empirical.studies.graph.mechanism import ov_by_factor
    from empirical.task.graph.vocab import GraphVocabulary

    vocab = GraphVocabulary(23, 8, 40)
    cfg = ModelConfig.for_task(23, 8 + 3, 40, d_model=16, n_heads=2, d_mlp=16)
    learned = ov_by_factor(AssignAddTransformer(cfg, seed=0), vocab)
    relative = dataclasses.replace(cfg, positions="relative")
    assert learned["factors"] == ["names", "values", "marks", "positions"]
    assert ov_by_factor(AssignAddTransformer(relative, seed=0), vocab)["factors"] == [
        "names", "values", "marks"]


def test_a_relative_models_position_preferences_read_its_effective_bias():
    """position_preferences: per head, the distance of the largest gain x b_rel, that bias and
    its margin over the median; None for learned positions."""
    import dataclasses

    import torch

    from empirical.model.config import ModelConfig
    from empirical.model.transformer import AssignAddTransformer
    from empirical.studies.graph.mechanism import position_preferences

    cfg = ModelConfig.for_task(23, 8 + 3, 40, d_model=16, n_heads=2, d_mlp=16)
    assert position_preferences(AssignAddTransformer(cfg, seed=0)) is None
    relative = dataclasses.replace(cfg, positions="relative", relative_window=5, relative_gain=4.0)
    model = AssignAddTransformer(relative, seed=0)
    with torch.no_grad():
        model.blocks[1].attn.b_rel.copy_(torch.tensor([[0.0, 0.5, 2.0, 0.25, 0.0]] * 2))
    head = position_preferences(model)["heads"][1][0]
    assert head == {"distance": 2, "bias": 8.0, "margin": 7.0}  # 4 x 2.0 over 4 x 0.25
