"""The command line of `python -m empirical race [OVERRIDES...] [--only NAME ...] [--seeds S ...]
[--out DIR]` (`RaceOptions`), declared once (empirical.config.options; docs/race.md): which of
the race's configurations (`configs.race_configs`), their seeds, and dotted dynamics-ladder
overrides for all of them. No torch here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import model_validator
from pydantic_core import ArgsKwargs

from disentangled.command_line import check_output_dir
from disentangled.errors import UsageError
from empirical.bridge.ladder_dynamics.config import dynamics_field
from empirical.bridge.race.configs import SETS, RaceConfig, dynamics_config, select
from empirical.config.field_types import Flag, checked, choice, fail
from empirical.config.options import arg, options_class
from empirical.config.output_options import Output

LISTS = ("only", "seeds")  # the list flags whose `KEY=VALUE` words are overrides


def _seeds(value: Any) -> tuple[int, ...]:
    """Distinct integers >= 0, as words ("0", "1") or numbers."""
    words = value if isinstance(value, (list, tuple)) else [value]
    try:
        seeds = tuple(int(w) if isinstance(w, str) else w for w in words)
    except ValueError:
        raise fail("must be integers >= 0") from None
    ok = all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    if not ok or not seeds or len(set(seeds)) != len(seeds):
        raise fail("must be distinct integers >= 0")
    return seeds


def is_override(word: str) -> bool:
    """`steps=20` is an override; `embeddings@lr=1e-4` (a configuration's name) is not."""
    return "=" in word and "@" not in word.split("=", 1)[0]


@options_class("race", "Test the race criterion (docs/race.md) on the ladder's configurations.",
               field_hint=dynamics_field)  # fmt: skip
class RaceOptions(Output):
    """The configurations, their seeds and overrides, and where the files go (--quiet,
    --format: empirical.config.output_options)."""

    overrides: tuple[str, ...] = arg(
        (), help="dynamics-ladder overrides for every configuration (steps=100)",
        positional=True, nargs="*", raw=True)  # fmt: skip
    only: tuple[str, ...] | None = arg(
        None, help="only these configurations (as in race.json)", nargs="+", metavar="NAME",
        raw=True)  # fmt: skip
    seeds: checked(tuple[int, ...], _seeds) | None = arg(
        None, help="every configuration's seeds (default: 0 1 2)", nargs="+", metavar="S",
        raw=True)  # fmt: skip
    configs: choice(*SETS) = arg(
        "all", help="which configurations without --only: original (docs/race.md's 43), new "
        "(the new test set) or all")
    predict_only: Flag = arg(
        False, help="train nothing: the step-0 quantities and the predictions (tau fitted on "
        "the fit half as OUT/race_state.json has it)")
    rescore: str | None = arg(
        None, metavar="RACE_JSON", raw=True, help="train nothing: score a race.json written "
        "earlier as the race scores now (beside the tau-free rule and the majority class)")
    out: str = arg("runs/race", help="output directory")

    @model_validator(mode="before")
    @classmethod
    def _overrides_after_lists(cls, data: Any) -> Any:
        """The `KEY=VALUE` words given after --only or --seeds (`--seeds 0 1 steps=100`) are
        overrides: moved to `overrides`, after the others, in that order."""
        if not isinstance(data, ArgsKwargs) or not data.kwargs:
            return data
        kwargs = dict(data.kwargs)
        moved = list(kwargs.get("overrides", ()))
        for name in LISTS:
            words = kwargs.get(name)
            if isinstance(words, (list, tuple)) and all(isinstance(w, str) for w in words):
                moved += [w for w in words if is_override(w)]
                kwargs[name] = [w for w in words if not is_override(w)] or None
        if moved:
            kwargs["overrides"] = moved
        return ArgsKwargs(data.args, kwargs)

    def configurations(self) -> list[RaceConfig]:
        """The configurations asked for (--only; all by default), in race order."""
        return select(list(self.only) if self.only else None, self.configs)

    def check(self) -> None:
        """Every configuration known, every override valid for each, the output directory
        possible: before anything runs."""
        if self.rescore is not None and not Path(self.rescore).is_file():
            raise UsageError(f"--rescore {self.rescore!r}: no such file")
        for rc in self.configurations():
            dynamics_config(rc, list(self.overrides))
        check_output_dir(self.out)
