"""docs/api.md, executed: its code blocks run in order in one namespace, as in a notebook
(the first trains the seconds-long run the others read), and every `expression  # -> output`
line must print `output`. Blocks marked `slow` (an analysis, a comparison with the theory,
a sweep, the sympy derivation) run only in `pytest -m slow`. Also: every package has an
`__all__`, and each name in it is defined where its package says."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest
from test_tl_quickstart import _check, checked, code_blocks

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"
RUNS_IN_DOC = "runs/smoke/"
PACKAGES = ("theory", "disentangled", "empirical")


def run_doc(tmp_path: Path, with_slow: bool) -> dict:
    """Execute the doc's blocks (all, or all but the slow ones) with its run directory under
    tmp_path; the namespace they leave."""
    runs = (tmp_path / "runs" / "smoke").as_posix() + "/"
    namespace = {"_check": _check, "__name__": "api_docs"}
    for info, code in code_blocks(DOC.read_text()):
        assert info in ("", "slow"), f"unknown block kind {info!r}"
        if info == "slow" and not with_slow:
            continue
        exec(compile(checked(code.replace(RUNS_IN_DOC, runs)), str(DOC), "exec"), namespace)
    return namespace


def test_api_doc_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the doc's configs/... paths
    namespace = run_doc(tmp_path, with_slow=False)
    assert namespace["result"]["step"] == 20 and (tmp_path / "runs" / "smoke" / "seed0").is_dir()
    assert not (ROOT / "runs" / "smoke" / "untrained.pt").exists()  # nothing in the repo


@pytest.mark.slow
def test_api_doc_runs_as_written_with_its_slow_blocks(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = run_doc(tmp_path, with_slow=True)
    assert "analysis" in namespace and "cq" in namespace and "outcome" in namespace


def test_every_top_level_name_has_an_example():
    """Each public name of `empirical` and `theory`, and the training's (empirical.train.loop,
    empirical.runs.phases), is used in a block."""
    import empirical
    import theory

    code = "\n".join(c for _, c in code_blocks(DOC.read_text()))
    text = DOC.read_text()
    for module in (empirical, theory):
        for name in module.__all__:
            assert f"{name}(" in code or name in text, f"{module.__name__}.{name}"
    for name in ("train_run", "summary_of", "detect_phases"):
        assert f"{name}(" in code


def _logged_run(path: Path) -> Path:
    """A run directory with a config and a two-record metrics log (the second subsampled),
    written as the trainer writes them; no training."""
    from empirical.config.io import save_config
    from empirical.runs.config import config_fingerprint, load_run_config
    from empirical.runs.metrics_log import append_metrics
    from empirical.runs.rundir import RunDir

    cfg = load_run_config(ROOT / "configs" / "smoke.toml")
    run = RunDir(path)
    run.path.mkdir(parents=True)
    save_config(cfg, run.config)
    fp = config_fingerprint(cfg)
    append_metrics(run.metrics, {"step": 0, "train_loss": None, "lr": 0.0, "elapsed_s": 0.0,
                                 "acc": {"a": 0.5, "b": 0.25}, "loss": {"a": 1.0, "b": 2.0},
                                 "fingerprint": fp})  # fmt: skip
    append_metrics(run.metrics, {"step": 20, "train_loss": 0.5, "lr": 0.001, "elapsed_s": 1.5,
                                 "acc": {"a": 1.0, "b": 0.75}, "loss": {"a": 0.1, "b": 0.2},
                                 "eval_n": {"a": 50, "b": 40}, "fingerprint": fp})  # fmt: skip
    return run.path


def test_load_metrics_flattens_every_record(tmp_path, monkeypatch):
    from empirical import load_metrics

    run = _logged_run(tmp_path / "run")
    rows = load_metrics(run, as_frame=False)
    assert rows[0] == {"step": 0, "train_loss": None, "lr": 0.0, "elapsed_s": 0.0,
                       "full_eval": True, "eval_n": None, "acc/a": 0.5, "acc/b": 0.25,
                       "loss/a": 1.0, "loss/b": 2.0}  # fmt: skip
    assert rows[1]["full_eval"] is False and rows[1]["eval_n"] == 90
    assert list(rows[0]) == list(rows[1])
    pytest.importorskip("pandas")
    frame = load_metrics(run)
    assert list(frame.columns) == list(rows[0]) and frame["acc/b"].tolist() == [0.25, 0.75]
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    assert load_metrics(run) == rows
    with pytest.raises(ImportError, match=r"needs pandas: pip install -e \"\.\[analysis\]\""):
        load_metrics(run, as_frame=True)


def test_summary_and_analysis_missing_name_the_command_that_writes_them(tmp_path):
    from empirical import load_analysis, load_metrics, load_summary
    from empirical.runs.rundir import RunDirError

    run = _logged_run(tmp_path / "run")
    with pytest.raises(RunDirError, match="no summary"):
        load_summary(run)
    with pytest.raises(RunDirError, match=f"python -m empirical analyze {run} --step 20"):
        load_analysis(run, step=20)
    (run / "analysis").mkdir()
    (run / "analysis" / "analysis.json").write_text('{"step": 20, "model": {}}')
    assert load_analysis(run) == {"step": 20, "model": {}}
    with pytest.raises(RunDirError, match="no such directory"):
        load_metrics(tmp_path / "missing")


@functools.cache
def _defined_names(path: Path) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _lazy_map(tree: ast.Module) -> dict[str, str]:
    """{name: module} of the names an __init__ imports on first use: a `lazy_exports(__name__,
    {...})` call, or an `EXPORTS = {name: module}` table (empirical's); else {}."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports":
            mapping = ast.literal_eval(node.args[1])
            return {name: module for module, names in mapping.items() for name in names}
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", "") == "EXPORTS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return {}


def test_every_package_lists_its_public_names_in_all():
    inits = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))
    assert {p.parent.name for p in inits} >= {"theory", "empirical", "train", "cli", "task"}
    for init in inits:
        tree = ast.parse(init.read_text())
        listed = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "__all__" for t in node.targets
            ):
                listed = ast.literal_eval(node.value)
        assert listed, f"{init.relative_to(ROOT)} has no __all__"
        assert len(set(listed)) == len(listed), f"{init.relative_to(ROOT)}: a name twice"
        lazy, here = _lazy_map(tree), _defined_names(init)
        for name in listed:
            if name in lazy:
                module = ROOT / Path(*lazy[name].split(".")).with_suffix(".py")
                assert name in _defined_names(module), f"{lazy[name]} defines no {name}"
            else:  # defined in the __init__, or a submodule of the package
                sub = init.parent / name
                assert name in here or sub.with_suffix(".py").is_file() or sub.is_dir(), (
                    f"{init.relative_to(ROOT)}: {name} is defined nowhere"
                )


def test_cli_lists_every_command_module():
    from empirical import cli
    from empirical.__main__ import COMMANDS

    modules = [command.module for command in COMMANDS.values()]
    here = {m.rsplit(".", 1)[1] for m in modules if m.startswith("empirical.cli.")}
    assert here <= set(cli.__all__), here - set(cli.__all__)
    assert set(cli.__all__) <= here, set(cli.__all__) - here  # no helper module listed


NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


@pytest.mark.slow  # a kernel start and every import in it: well over 10 s
def test_quickstart_notebook_runs(tmp_path, monkeypatch):
    """notebooks/quickstart.ipynb executed by nbclient, its parameters cell set to a
    seconds-long smoke run in tmp_path (the notebook's default trains configs/quick.toml)."""
    # the kernel inherits this process's environment: a command run in-process before this
    # test (use_cli_backend) set MPLBACKEND=Agg, under which the notebook shows no figure
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1 and "quick.toml" in parameters[0].source
    parameters[0].source = (
        "from pathlib import Path\n"
        f"ROOT = Path({ROOT.as_posix()!r})\n"
        "CONFIG = ROOT / 'configs' / 'smoke.toml'\n"
        "OVERRIDES = ['train.steps=20', 'train.eval_every=10']\n"
        f"RUN = Path({(tmp_path / 'seed0').as_posix()!r})\n"
    )
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", startup_timeout=300,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )  # fmt: skip  (startup_timeout: the kernel starts slowly beside -n auto's other worker)
    client.execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "trained 20 steps" in text and "identity score" not in text  # (in the figure)
    assert "layer-2 attention patched from clean" in text and "G1 diagonal" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # the curves, the trainer's figure, theory beside the model
    assert (tmp_path / "seed0" / "summary.json").is_file()


@pytest.mark.slow  # imports every package (torch, sympy, TransformerLens): seconds
def test_every_public_name_imports():
    import importlib

    for init in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")):
        name = ".".join(init.parent.relative_to(ROOT).parts)
        module = importlib.import_module(name)
        missing = []
        for public in module.__all__:
            try:
                sub = init.parent / public
                if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                    # a submodule (empirical.cli) or subpackage (empirical.bridge.ladder): not an
                    # attribute until imported (by whichever test ran before, if any)
                    importlib.import_module(f"{name}.{public}")
                else:
                    getattr(module, public)
            except (AttributeError, ImportError) as exc:
                if name == "empirical.model" and public == "to_hooked_transformer":
                    continue  # TransformerLens 4 has no HookedTransformer 3 to export to
                missing.append(f"{public} ({exc})")
        assert not missing, f"{name}: {missing}"
