"""`python -m empirical sample`: output format, labels, options, errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_task_helpers import ref_parse_text, ref_parse_tokens

from empirical.cli.sample import main
from empirical.task.config import task_config
from empirical.task.eval_sets import build_eval_set
from empirical.task.pairs import held_out_pairs, training_generator
from empirical.task.registry import family_of
from empirical.task.sampler import sample_training_batch
from empirical.task.vocab import Vocabulary


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_train_lines_are_text_and_correct_label(capsys):
    code, lines, err = run(capsys, "--split", "train", "--n", "300", "--seed", "0")
    assert code == 0 and err == "" and len(lines) == 300
    cfg = task_config()
    hs = {tuple(r) for r in held_out_pairs(cfg, 0).tolist()}
    for line in lines:
        text, label = line.split(" ")
        ref = ref_parse_text(text, 97)
        assert int(label) == ref["label"]
        x, y = ref["values"]
        assert (min(x, y), max(x, y)) not in hs
    # the same stream the library draws for seed 0
    batch = sample_training_batch(cfg, 300, training_generator(0), held_out=held_out_pairs(cfg, 0))
    assert [ln.split(" ")[0] for ln in lines] == family_of(cfg).vocabulary(cfg).decode(batch.tokens)


def test_eval_split_tokens_form(capsys):
    code, lines, _ = run(capsys, "--split", "1var/var", "--n", "50", "--tokens", "--seed", "2")
    assert code == 0 and len(lines) == 50
    for line in lines:
        *toks, label = line.split(" ")
        tok = ref_parse_tokens(" ".join(toks), 16)
        a, b = tok["ops"]
        assert a == "d" or b == "b"
        values = {letter: v for _, letter, v in tok["blocks"]}
        total = sum(values[o] if o.isalpha() else int(o) for o in (a, b)) % 97
        assert int(label) == total
    batch, _ = build_eval_set(task_config(), 2, "1var/var")
    assert [ln.rsplit(" ", 1)[0] for ln in lines] == Vocabulary(97, 5).decode_tokens(
        batch.tokens[:50]
    )


def test_held_out_and_overrides(capsys, tmp_path):
    code, lines, _ = run(capsys, "--held-out", "--seed", "3", "task.p=11")
    assert code == 0
    assert [list(map(int, ln.split())) for ln in lines] == held_out_pairs(
        task_config(p=11), 3
    ).tolist()
    code, lines, _ = run(
        capsys,
        "--n",
        "200",
        "task.p=11",
        "task.K=3",
        "task.max_assignments=3",
        "task.r1=a",
        "task.r2=c",
    )
    assert code == 0
    for line in lines:
        text, label = line.split(" ")
        ref = ref_parse_text(text, 11)
        assert int(label) == ref["label"] and all(v < 11 for _, v in ref["assign"])
        assert ref["ops"][0] != "a" and ref["ops"][1] != "c"
    cfg = tmp_path / "run.toml"
    cfg.write_text("seed = 5\n[task]\np = 13\n[train]\nsteps = 10\n")
    code, lines, _ = run(capsys, "--config", str(cfg), "--held-out")
    assert code == 0
    assert [list(map(int, ln.split())) for ln in lines] == held_out_pairs(
        task_config(p=13), 5
    ).tolist()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--split", "3var/ind"], "--split '3var/ind': unknown"),
        (["--n", "-1"], "--n -1: must be an integer >= 0"),
        (["--n", "ten"], "--n ten: must be an integer >= 0"),
        (["task.p=1"], "task.p = 1 is out of range"),
        (["task.r2=f"], "task.r2: 'f' is not a variable"),
        (["task.nope=1"], "unknown field 'nope'"),
        (["model.d_model=3"], "`sample` takes task.FIELD=VALUE"),
        (["--config", "/no/such/file.toml"], "does not exist"),
        (["task.held_out_fraction=0", "--split", "0var/pair"], "no such set"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_one_error_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == []
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_module_entry_point():
    res = subprocess.run(
        [sys.executable, "-m", "empirical", "sample", "--n", "3", "--split", "2var/both"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 3
