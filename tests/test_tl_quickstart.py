"""docs/tl_quickstart.md, executed: its code blocks run in order in one namespace, as in a
notebook, and every `expression  # -> output` line must print `output`.

The run is a hand-built model that solves the task exactly (empirical.analysis.reference),
saved as a run directory the way the trainer leaves one, so the answers are the task's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "tl_quickstart.md"
RUN_IN_DOC = "runs/paper/seed0"
BLOCK_RE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
CHECK_RE = re.compile(r"^(?P<expr>[^#\n]+?)\s*# -> (?P<out>.+)$")


def _has_hooked_transformer() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(info string after ```python, code) of every python block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in BLOCK_RE.finditer(text)]


def checked(code: str) -> str:
    """`expr  # -> out` lines become `_check(expr, "out")`, the rest is unchanged."""
    lines = []
    for line in code.splitlines():
        m = CHECK_RE.match(line)
        if m and not line.startswith((" ", "\t")):
            lines.append(f"_check(({m.group('expr').strip()}), {m.group('out').strip()!r})")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _check(value, expected: str) -> None:
    assert str(value) == expected, f"doc says {expected!r}, the code gives {str(value)!r}"


@pytest.fixture(scope="session")  # built once per pytest process (worker)
def paper_run(tmp_path_factory):
    """A run directory with the paper's task (p=97, K=5, L=16) holding the exact circuit."""
    from empirical.analysis.reference import reference_model
    from empirical.config.io import save_config
    from empirical.model.checkpoint import save_model
    from empirical.runs.config import load_run_config
    from empirical.runs.rundir import RunDir

    cfg = load_run_config(None)
    model = reference_model(cfg.task)
    cfg = load_run_config(
        None,
        [
            f"model.d_model={model.cfg.d_model}",
            f"model.d_mlp={model.cfg.d_mlp}",
            "model.dtype=float64",
        ],
    )
    run = RunDir(tmp_path_factory.mktemp("tl_quickstart") / "seed0")
    save_config(cfg, run.config)
    save_model(model, run.last_checkpoint, {"step": 0})
    return run


def test_the_doc_has_the_promised_blocks():
    blocks = code_blocks(DOC.read_text())
    code = "\n".join(c for _, c in blocks)
    for needle in (
        "from empirical import load_run",
        f'load_run("{RUN_IN_DOC}")',
        "model.to_tokens(",
        "model.to_str_tokens(",
        "model.run_with_cache(tokens)",
        'cache["pattern", 1]',
        "logits[0, -1].argmax()",
        "patching.get_act_patch_resid_pre(",
        "patching.get_act_patch_attn_head_out_by_pos(",
        "to_hooked_transformer(model)",
    ):
        assert needle in code, needle
    assert sum(1 for line in code.splitlines() if CHECK_RE.match(line)) >= 10


def test_quickstart_runs_as_written(paper_run):
    namespace = {"_check": _check, "__name__": "tl_quickstart"}
    ran = 0
    for info, code in code_blocks(DOC.read_text()):
        if info == "tl3" and not _has_hooked_transformer():
            continue  # TransformerLens 4: no HookedTransformer to export to
        code = code.replace(RUN_IN_DOC, paper_run.path.as_posix())
        exec(compile(checked(code), str(DOC), "exec"), namespace)
        ran += 1
    assert ran >= 4
    model = namespace["model"]
    assert not model.training and namespace["logits"].shape == (1, 16, 97)


def test_export_block_explains_itself_without_transformer_lens_3(paper_run):
    if _has_hooked_transformer():
        pytest.skip("TransformerLens 3 is installed: the export block ran above")
    from empirical.model.export import to_hooked_transformer
    from empirical.runs.load import load_run

    model, _ = load_run(paper_run.path)
    with pytest.raises(ImportError, match="TransformerLens 3"):
        to_hooked_transformer(model)
