"""The race's configurations (docs/race.md, "How it is tested"): each is a dynamics-ladder
configuration (the variant's releases and dotted overrides of `DynamicsConfig`), named, and
assigned to the fit or the test half by a hash of its name, fixed before anything runs; and
the new test set (issue #45, `new_configs`: split "new"), where the race and the tau-free rule
disagree, named and predicted before any of it was trained (race_new.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from empirical.bridge.ladder_dynamics.config import RELEASES, DynamicsConfig
from empirical.bridge.ladder_dynamics.variants import ladder_variants
from empirical.bridge.race.race_new import NEW_SET
from empirical.config.io import ConfigError, load_config

# every seed's start is W^0 perturbed by this relative scale (DynamicsConfig.init_perturbation),
# so that seeds differ in more than the minibatch order (issue #45); an override can change it
INIT_PERTURBATION = 0.01

# the configurations whose outcome was published when the criterion was written (commit
# 3cffc10, docs/race.md): the ladder's 14 variants (docs/ladder.md's table) and, in that
# commit's docs/ladder.md ("at SGD 0.001 for the released pieces `layer1` and `embeddings`
# still end at 0.467"), layer 1 and the embeddings each at rate 1e-3
KNOWN_AT_RATE = ("layer1@lr=1e-3", "embeddings@lr=1e-3")


@dataclass(frozen=True)
class RaceConfig:
    """name: as in race.json; releases: the ladder's releases; overrides: dotted
    `DynamicsConfig` fields (applied after the command's own); new: one of the new test
    set (split "new", not hashed)."""

    name: str
    releases: tuple[str, ...]
    overrides: tuple[str, ...] = ()
    new: bool = False

    @property
    def split(self) -> str:
        return "new" if self.new else split_of(self.name)


def split_of(name: str) -> str:
    """The half of `name`: "fit" iff int(sha256(name), 16) is even, else "test"."""
    return "fit" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2 == 0 else "test"


def _rates() -> list[RaceConfig]:
    out = []
    for piece in ("layer1", "embeddings"):
        out += [RaceConfig(f"{piece}@lr={lr}", (piece,), (f"sgd.lr={lr}",))
                for lr in ("1e-3", "1e-4", "1e-5")]  # fmt: skip
        out.append(RaceConfig(f"{piece}@lr_qk=1", (piece,), ("sgd.lr_qk=1.0",)))
    out += [RaceConfig(f"baseline@lr_qk={r}", (), (f"sgd.lr_qk={r}",)) for r in ("0.1", "0.05")]
    out.append(RaceConfig("ov+mlp@lr=0.1", ("ov", "mlp"), ("sgd.lr=0.1",)))
    out.append(RaceConfig("layer1+embeddings@lr=1e-4", ("layer1", "embeddings"), ("sgd.lr=1e-4",)))
    return out


def _size(name: str, releases: tuple[str, ...], p: int, K: int) -> RaceConfig:
    return RaceConfig(f"{name}@p={p},K={K}", releases, (f"theorem.p={p}", f"theorem.K={K}"))


def _sizes() -> list[RaceConfig]:
    out = [_size("baseline", (), p, K) for p, K in ((3, 2), (5, 2), (7, 3), (11, 2), (13, 2),
                                                      (23, 2))]  # fmt: skip
    return out + [_size("layer1", ("layer1",), 7, 3), _size("embeddings", ("embeddings",), 3, 2)]


def _scales() -> list[RaceConfig]:
    out = [RaceConfig(f"baseline@xi={x}", (), (f"theorem.xi={x}",)) for x in ("3", "30")]
    out.append(RaceConfig("layer1@xi=30", ("layer1",), ("theorem.xi=30",)))
    return out + [RaceConfig(f"baseline@beta={b}", (), (f"theorem.beta={b}",)) for b in ("2", "6")]


def _factors() -> list[RaceConfig]:
    out = [RaceConfig(f"qk_factors@lr_qk={r}", (), ("qk_factors=true", f"sgd.lr_qk={r}"))
           for r in ("0.2", "0.02", "0.002")]  # fmt: skip
    return out + [RaceConfig("qk_factors+adamw", ("adamw",), ("qk_factors=true",))]


def original_configs() -> list[RaceConfig]:
    """The configurations of docs/race.md, in its order: the ladder's 14 variants, rates,
    sizes, logit scale and start, factors."""
    ladder = [RaceConfig(name, rel) for name, rel in ladder_variants(list(RELEASES))]
    return ladder + _rates() + _sizes() + _scales() + _factors()


def new_configs() -> list[RaceConfig]:
    """The new test set (race_new.NEW_SET), split "new"."""
    return [RaceConfig(name, tuple(rel), tuple(over), new=True) for name, rel, over in NEW_SET]


def known_when_written() -> set[str]:
    """The names whose outcome was known when the criterion was written (KNOWN_AT_RATE)."""
    return {name for name, _ in ladder_variants(list(RELEASES))} | set(KNOWN_AT_RATE)


def race_configs() -> list[RaceConfig]:
    """Every configuration: docs/race.md's, then the new test set's."""
    out = original_configs() + new_configs()
    assert len({c.name for c in out}) == len(out)
    return out


def dynamics_config(rc: RaceConfig, overrides: list[str] | None = None) -> DynamicsConfig:
    """The ladder config of one race configuration: the defaults, the command's `overrides`,
    then the configuration's own, with `releases` = exactly its releases (so that the
    populations its data need are built)."""
    mine = [f"init_perturbation={INIT_PERTURBATION}", *(overrides or []), *rc.overrides,
            f"releases={json.dumps(list(rc.releases))}"]  # fmt: skip
    try:
        return load_config(DynamicsConfig, None, mine)
    except ConfigError as exc:
        raise ConfigError(f"race configuration {rc.name!r}: {exc}") from None


SETS = ("all", "original", "new")


def select(names: list[str] | None, which: str = "all") -> list[RaceConfig]:
    """The configurations called `names` (all of set `which` when None: "original", docs/
    race.md's; "new", the new test set's; "all"), in race order; an unknown name is a
    ConfigError listing the known ones."""
    every = race_configs()
    if not names:
        return [c for c in every if which == "all" or (which == "new") == c.new]
    known = {c.name: c for c in every}
    for n in names:
        if n not in known:
            raise ConfigError(f"--only: {n!r} is not a race configuration; known: "
                              f"{', '.join(known)}")  # fmt: skip
    return [c for c in every if c.name in set(names)]
