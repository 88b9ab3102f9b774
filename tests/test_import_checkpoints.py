"""Importing TransformerLens checkpoints (the paper authors' run) into a run directory.

The conversion is checked against a direct forward of their state dict in their layout,
written here from TransformerLens's definition (independently of empirical.model.tl_import),
on the real checkpoints when the authors' folder is present (empirical.config.paths:
../shared/authors beside the repository, or $AUTHORS_DIR); every refusal on tiny
synthetic state dicts, each leaving nothing written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from disentangled.errors import UsageError
from empirical.__main__ import main as empirical_main
from empirical.config.io import ConfigError
from empirical.config.paths import authors_dir, where_to_point
from empirical.model.checkpoint import CheckpointError, load_model
from empirical.model.tl_import import (
    convert_tl_state_dict,
    last_position_logits,
    our_to_their_ids,
    read_tl_state_dict,
    step_from_name,
    their_to_our_ids,
    tl_reference_forward,
)
from empirical.runs.config import load_run_config
from empirical.runs.import_run import import_checkpoints
from empirical.runs.rundir import RunDir
from empirical.task.eval_sets import build_eval_set
from empirical.task.pairs import held_out_pairs, ordered_ranks, training_generator
from empirical.task.sampler import sample_training_batch

ROOT = Path(__file__).resolve().parents[1]
AUTHORS = authors_dir()
# the smoke config with K = 4: the id permutation is then not its own inverse (with K = 3 it
# is, and a conversion in the wrong direction would pass)
TINY = """
name = "tiny"
seed = 0
[task]
p = 11
K = 4
max_assignments = 3
r1 = ["c"]
r2 = ["b"]
eval_size = 300
[model]
d_model = 32
d_mlp = 64
[train]
steps = 60
"""


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


# -- a TransformerLens forward in their layout, from its definition --------------------------


def tl_forward(sd: dict, tokens: torch.Tensor) -> torch.Tensor:
    """HookedTransformer.forward for 2 layers, no LayerNorm, ReLU MLPs, with biases: logits
    [batch, pos, d_vocab_out] on THEIR token ids, float64. Uses the state dict's own mask
    and IGNORE buffers where present, as TransformerLens does."""
    f = {k: v.double() if v.is_floating_point() else v for k, v in sd.items()}
    n_layers = 1 + max(int(k.split(".")[1]) for k in f if k.startswith("blocks."))
    pos = tokens.shape[1]
    x = f["embed.W_E"][tokens] + f["pos_embed.W_pos"][:pos].unsqueeze(0)
    for layer in range(n_layers):
        p = f"blocks.{layer}."
        d_head = f[p + "attn.W_Q"].shape[-1]
        heads = []
        for h in range(f[p + "attn.W_Q"].shape[0]):
            q = x @ f[p + "attn.W_Q"][h] + f[p + "attn.b_Q"][h]
            k = x @ f[p + "attn.W_K"][h] + f[p + "attn.b_K"][h]
            v = x @ f[p + "attn.W_V"][h] + f[p + "attn.b_V"][h]
            scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
            mask = sd.get(p + "attn.mask", torch.ones(pos, pos).tril().bool())[:pos, :pos]
            ignore = float(sd.get(p + "attn.IGNORE", torch.tensor(-math.inf)))
            scores = torch.where(mask.bool(), scores, torch.full_like(scores, ignore))
            heads.append(scores.softmax(-1) @ v @ f[p + "attn.W_O"][h])
        x = x + sum(heads) + f[p + "attn.b_O"]
        hidden = torch.relu(x @ f[p + "mlp.W_in"] + f[p + "mlp.b_in"])
        x = x + hidden @ f[p + "mlp.W_out"] + f[p + "mlp.b_out"]
    return x @ f["unembed.W_U"] + f["unembed.b_U"]


def their_ids(tokens: torch.Tensor, p: int, K: int) -> torch.Tensor:
    """Our ids -> theirs, spelled out: numbers same, variables a.. -> p+3.., + = pad -> p.."""
    out = tokens.clone()
    var = (tokens >= p) & (tokens < p + K)
    out[var] = tokens[var] + 3
    for ours, theirs in ((p + K, p), (p + K + 1, p + 1), (p + K + 2, p + 2)):
        out[tokens == ours] = theirs
    return out


def last(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, -1] if logits.dim() == 3 else logits


# -- the real checkpoints ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def authors_cfg():
    src = AUTHORS / "checkpoints"
    config = ROOT / "configs" / "authors.toml"
    if not src.is_dir():
        pytest.skip(where_to_point(src))
    assert config.is_file(), f"{config} is missing from the repository"
    return load_run_config(config)


def authors_sequences(cfg) -> torch.Tensor:
    """Our-id sequences of the authors' config: training draws and evaluation sets."""
    seqs = [
        sample_training_batch(
            cfg.task, 256, training_generator(0), held_out=held_out_pairs(cfg.task, cfg.seed)
        ).tokens
    ]
    for name in ("0var/pair", "1var/var", "2var/both", "curated/novel_orderings"):
        batch, _ = build_eval_set(cfg.task, cfg.seed, name)
        seqs.append(batch.tokens[:128])
    return torch.cat(seqs)


@pytest.mark.parametrize("name", ["checkpoint_step_5301.pth", "model_state_dict.pth"])
def test_converted_model_equals_their_forward(authors_cfg, name):
    cfg = authors_cfg
    p, K = cfg.task.p, cfg.task.K
    sd = torch.load(AUTHORS / "checkpoints" / name, map_location="cpu", weights_only=True)
    tokens = authors_sequences(cfg)
    theirs = their_ids(tokens, p, K)
    assert torch.equal(theirs, our_to_their_ids(p, K)[tokens])
    ref = tl_forward(sd, theirs)[:, -1]
    assert ref.shape == (len(tokens), p)
    # the library's reference forward agrees with this one
    assert torch.allclose(tl_reference_forward(sd, theirs)[:, -1], ref, atol=1e-9)

    # float64 conversion: equal up to float64 rounding
    cfg64 = dataclasses.replace(cfg.built_model_config(), dtype="float64")
    model64 = convert_tl_state_dict(sd, cfg64, p, K, name)
    assert (last_position_logits(model64, tokens) - ref).abs().max() < 1e-5
    assert (model64.forward_fast(tokens) - ref).abs().max() < 1e-5
    with torch.no_grad():
        assert (last(model64(tokens)) - ref).abs().max() < 1e-5

    # float32 (what a snapshot holds): within 1e-5 of the largest logit, same answers
    model32 = convert_tl_state_dict(sd, cfg.built_model_config(), p, K, name)
    got = model32.forward_fast(tokens).double()
    assert (got - ref).abs().max() <= 1e-5 * ref.abs().max()
    assert torch.equal(got.argmax(-1), ref.argmax(-1))


def test_unconverted_embedding_would_not_match(authors_cfg):
    # the test can fail: copying W_E without the permutation changes the logits
    cfg = authors_cfg
    p, K = cfg.task.p, cfg.task.K
    sd = read_tl_state_dict(AUTHORS / "checkpoints" / "model_state_dict.pth")
    model = convert_tl_state_dict(sd, cfg.built_model_config(), p, K)
    with torch.no_grad():
        model.embed.W_E.copy_(sd["embed.W_E"])
    tokens = authors_sequences(cfg)[:512]
    ref = tl_forward(sd, their_ids(tokens, p, K))[:, -1]
    assert (model.forward_fast(tokens).double() - ref).abs().max() > 1.0


def test_final_model_of_the_authors_import_is_step_40000(authors_cfg, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("checkpoint_step_5301.pth", "model_state_dict.pth"):
        (src / name).symlink_to(AUTHORS / "checkpoints" / name)
    out = tmp_path / "run"
    result = import_checkpoints(
        src,
        ROOT / "configs" / "authors.toml",
        out,
        train_pairs=AUTHORS / "train_pairs.json",
        command="test",
    )
    assert result.steps == [5301, 40000]
    run = RunDir(out)
    assert run.final_model() == run.snapshot(40000)
    record = run.read_imported()
    assert record["train_pairs"]["held_out_pairs"] == 1045
    ids = record["token_map"]["ids"]
    assert ids["a"] == [62, 59] and ids["l"] == [73, 70] and ids["+"] == [59, 71]
    assert ids["="] == [60, 72] and ids["pad"] == [61, 73] and ids["58"] == [58, 58]
    sd = read_tl_state_dict(src / "model_state_dict.pth")
    tokens = authors_sequences(authors_cfg)[:256]
    ref = tl_forward(sd, their_ids(tokens, 59, 12))[:, -1]
    got = load_model(run.final_model()).forward_fast(tokens).double()
    assert (got - ref).abs().max() <= 1e-5 * ref.abs().max()


# -- tiny synthetic sources -------------------------------------------------------------------


def tiny_cfg():
    """The TINY config's sizes (for building state dicts without a file)."""
    sizes = ["task.p=11", "task.K=4", "task.max_assignments=3", "model.d_model=32"]
    return load_run_config(None, sizes + ["task.r1=c", "task.r2=b", "model.d_mlp=64"])


def tl_state_dict(seed: int = 0, cfg=None) -> dict:
    """A random TransformerLens state dict of the tiny config's sizes, our architecture
    (zero biases, zero block-0 MLP), with the buffers."""
    cfg = tiny_cfg() if cfg is None else cfg
    m = cfg.built_model_config()
    d, e, dm, V, n, out = m.d_model, m.d_head_, m.d_mlp, m.d_vocab, m.n_ctx, m.d_vocab_out
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    sd = {"embed.W_E": r(V, d), "pos_embed.W_pos": r(n, d)}
    for layer in range(2):
        b = f"blocks.{layer}."
        for w in ("W_Q", "W_K", "W_V"):
            sd[b + "attn." + w] = r(1, d, e)
        sd[b + "attn.W_O"] = r(1, e, d)
        for w in ("b_Q", "b_K", "b_V"):
            sd[b + "attn." + w] = torch.zeros(1, e)
        sd[b + "attn.b_O"] = torch.zeros(d)
        sd[b + "attn.mask"] = torch.ones(n, n).tril().bool()
        sd[b + "attn.IGNORE"] = torch.tensor(-math.inf)
        sd[b + "mlp.W_in"] = r(d, dm) if layer == 1 else torch.zeros(d, dm)
        sd[b + "mlp.W_out"] = r(dm, d) if layer == 1 else torch.zeros(dm, d)
        sd[b + "mlp.b_in"] = torch.zeros(dm)
        sd[b + "mlp.b_out"] = torch.zeros(d)
    sd["unembed.W_U"] = r(d, out)
    sd["unembed.b_U"] = torch.zeros(out)
    return sd


def write_source(folder: Path, files: dict[str, dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, sd in files.items():
        torch.save(sd, folder / name)
    return folder


def good_source(folder: Path) -> Path:
    return write_source(
        folder,
        {
            "checkpoint_step_1.pth": tl_state_dict(1),
            "checkpoint_step_101.pth": tl_state_dict(2),
            "model_state_dict.pth": tl_state_dict(3),
        },
    )


def nothing_written(tmp_path: Path, out: Path) -> bool:
    """`out` does not exist and no temporary directory was left next to it."""
    leftovers = [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    return not out.exists() and not leftovers


def test_import_writes_a_run_directory(tmp_path, tiny):
    src = good_source(tmp_path / "src")
    out = tmp_path / "runs" / "imported"
    rc = empirical_main(
        ["import-checkpoints", str(src), "--config", str(tiny), "--out", str(out)]
        + ["--final-step", "200", "--quiet", "seed=3"]
    )
    assert rc == 0
    run = RunDir(out)
    cfg = run.read_config()
    assert cfg.seed == 3 and cfg.name == "tiny"
    assert run.snapshot_steps() == [1, 101, 200]
    assert not run.last_checkpoint.exists() and run.final_model() == run.snapshot(200)
    assert run.eval_sets.is_file()
    record = run.read_imported()
    assert record["source"] == str(src.resolve()) and record["final_step"] == 200
    assert "import-checkpoints" in record["command"] and record["date"]
    by_file = {f["file"]: f for f in record["files"]}
    assert {n: f["step"] for n, f in by_file.items()} == {
        "checkpoint_step_1.pth": 1,
        "checkpoint_step_101.pth": 101,
        "model_state_dict.pth": 200,
    }
    for name, f in by_file.items():
        assert f["sha256"] == hashlib.sha256((src / name).read_bytes()).hexdigest()
    p, K = cfg.task.p, cfg.task.K
    assert record["token_map"]["ids"]["pad"] == [p + 2, p + K + 2]
    assert torch.equal(their_to_our_ids(p, K)[our_to_their_ids(p, K)], torch.arange(p + K + 3))
    # every snapshot computes what its source computes
    tokens = build_eval_set(cfg.task, cfg.seed, "2var/ind")[0].tokens[:200]
    for name, step in (("checkpoint_step_101.pth", 101), ("model_state_dict.pth", 200)):
        sd = torch.load(src / name, weights_only=True)
        ref = tl_forward(sd, their_ids(tokens, p, K))[:, -1]
        got = load_model(run.snapshot(step)).forward_fast(tokens).double()
        assert (got - ref).abs().max() <= 1e-5 * max(1.0, float(ref.abs().max()))
    # nothing else next to it
    assert [p.name for p in out.parent.iterdir()] == ["imported"]


def test_reimport_of_the_same_source_replaces_it_another_dir_needs_overwrite(tmp_path, tiny):
    src = good_source(tmp_path / "src")
    out = tmp_path / "run"
    import_checkpoints(src, tiny, out, final_step=200, command="first")
    (out / "extra.txt").write_text("x")
    result = import_checkpoints(src, tiny, out, final_step=300, command="second")
    assert result.replaced and RunDir(out).snapshot_steps() == [1, 101, 300]
    assert not (out / "extra.txt").exists()

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not an earlier import.*--overwrite"):
        import_checkpoints(src, tiny, other, final_step=200)
    assert (other / "notes.txt").read_text() == "mine" and len(list(other.iterdir())) == 1
    import_checkpoints(src, tiny, other, final_step=200, overwrite=True)
    assert RunDir(other).snapshot_steps() == [1, 101, 200]
    assert not (other / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "run", "src", "tiny.toml"]


def test_train_pairs_match_and_mismatch(tmp_path, tiny):
    cfg = load_run_config(tiny)
    p = cfg.task.p
    held = set(
        ordered_ranks(held_out_pairs(cfg.task, cfg.seed), p, cfg.task.held_out_form).tolist()
    )
    trained = [[r // p, r % p] for r in range(p * p) if r not in held]
    src = good_source(tmp_path / "src")
    ok = tmp_path / "train_pairs.json"
    ok.write_text(json.dumps(trained))
    out = tmp_path / "run"
    result = import_checkpoints(src, tiny, out, train_pairs=ok, final_step=200)
    assert RunDir(result.out).read_imported()["train_pairs"]["held_out_pairs"] == len(held)

    # two trained pairs dropped from the file, one held-out pair added: 3 differ
    first_held = min(held)
    bad_pairs = trained[2:] + [[first_held // p, first_held % p]]
    bad = tmp_path / "bad_pairs.json"
    bad.write_text(json.dumps({"p": p, "train_pairs": bad_pairs}))
    out2 = tmp_path / "run2"
    with pytest.raises(ConfigError, match=r"in 3 ordered pairs.*task\.train_pairs_file="):
        import_checkpoints(src, tiny, out2, train_pairs=bad, final_step=200)
    assert nothing_written(tmp_path, out2)


def refused(tmp_path, tiny, files: dict[str, dict], match: str, **kw) -> None:
    src = write_source(tmp_path / "src", files)
    out = tmp_path / "out" / "run"
    with pytest.raises(CheckpointError, match=match):
        import_checkpoints(src, tiny, out, final_step=200, **kw)
    assert not (tmp_path / "out").exists()  # not even the parent was created
    # the command line: one error line, exit status 2
    rc = empirical_main(
        ["import-checkpoints", str(src), "--config", str(tiny), "--out", str(out), "--quiet"]
        + ["--final-step", "200"]
    )
    assert rc == 2 and not (tmp_path / "out").exists()


def test_refuses_a_bad_shape(tmp_path, tiny, capsys):
    sd = tl_state_dict()
    sd["blocks.1.mlp.W_in"] = torch.zeros(32, 65)
    files = {"checkpoint_step_1.pth": tl_state_dict(), "checkpoint_step_9.pth": sd}
    match = r"step_9\.pth.*blocks\.1\.mlp\.W_in has shape \[32, 65\], expected \[32, 64\]"
    refused(tmp_path, tiny, files, match)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "W_in" in err


def test_refuses_a_vocabulary_that_does_not_fit_the_task(tmp_path, tiny):
    sd = tl_state_dict()
    sd["embed.W_E"] = torch.zeros(sd["embed.W_E"].shape[0] + 1, 32)
    refused(tmp_path, tiny, {"checkpoint_step_1.pth": sd}, r"d_vocab = 19 .*needs d_vocab = 18")


def test_refuses_a_context_or_output_size_that_does_not_fit(tmp_path, tiny):
    sd = tl_state_dict()
    sd["pos_embed.W_pos"] = torch.zeros(12, 32)
    sd["unembed.W_U"] = torch.zeros(32, 13)
    sd["unembed.b_U"] = torch.zeros(13)
    refused(tmp_path, tiny, {"checkpoint_step_1.pth": sd}, r"n_ctx = 12 .*d_vocab_out = 13")


def test_refuses_a_missing_or_unexpected_key(tmp_path, tiny):
    sd = tl_state_dict()
    del sd["blocks.0.attn.W_V"]
    sd["ln_final.w"] = torch.ones(32)
    refused(
        tmp_path,
        tiny,
        {"checkpoint_step_1.pth": sd},
        r"missing blocks\.0\.attn\.W_V.*unexpected ln_final\.w",
    )


def test_refuses_a_non_zero_bias(tmp_path, tiny):
    sd = tl_state_dict()
    sd["blocks.1.attn.b_K"][0, 3] = 0.01
    refused(
        tmp_path, tiny, {"model_state_dict.pth": sd}, r"blocks\.1\.attn\.b_K is not zero.*no biases"
    )
    sd = tl_state_dict()
    sd["unembed.b_U"][0] = -1.0
    refused(tmp_path, tiny, {"model_state_dict.pth": sd}, r"unembed\.b_U is not zero")


def test_refuses_a_non_zero_block0_mlp(tmp_path, tiny):
    sd = tl_state_dict()
    sd["blocks.0.mlp.W_out"][5, 5] = 0.2
    files = {"checkpoint_step_1.pth": tl_state_dict(), "checkpoint_step_2.pth": sd}
    refused(
        tmp_path, tiny, files, r"step_2\.pth.*blocks\.0\.mlp\.W_out is not zero.*no MLP in block 0"
    )


def test_refuses_a_non_causal_mask(tmp_path, tiny):
    sd = tl_state_dict()
    sd["blocks.0.attn.mask"] = torch.ones(16, 16).bool()
    refused(
        tmp_path, tiny, {"checkpoint_step_1.pth": sd}, r"blocks\.0\.attn\.mask .*not the causal"
    )


def test_refuses_a_file_name_without_a_step(tmp_path, tiny):
    files = {"checkpoint_step_1.pth": tl_state_dict(), "final_weights.pth": tl_state_dict()}
    refused(tmp_path, tiny, files, r"final_weights\.pth: no step number in the file name")


def test_refuses_two_files_of_one_step(tmp_path, tiny):
    files = {"checkpoint_step_200.pth": tl_state_dict(), "model_state_dict.pth": tl_state_dict()}
    refused(tmp_path, tiny, files, r"both step 200.*--final-step")


def test_refuses_a_file_that_is_not_a_state_dict(tmp_path, tiny):
    src = tmp_path / "src"
    src.mkdir()
    (src / "checkpoint_step_1.pth").write_bytes(b"not a torch file")
    out = tmp_path / "run"
    with pytest.raises(CheckpointError, match=r"checkpoint_step_1\.pth: cannot be read"):
        import_checkpoints(src, tiny, out)
    assert nothing_written(tmp_path, out)


def test_step_from_name():
    assert step_from_name("a/checkpoint_step_5301.pth", 40000) == 5301
    assert step_from_name("model_state_dict.pth", 40000) == 40000
    assert step_from_name("run_step-7.pt", 1) == 7
    with pytest.raises(CheckpointError, match="no step number"):
        step_from_name("checkpoint.pth", 1)
