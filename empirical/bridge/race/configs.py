"""The race's configurations (docs/race.md, "How it is tested"): each is a dynamics-ladder
configuration (the variant's releases and dotted overrides of `DynamicsConfig`), named, and
assigned to the fit or the test half by a hash of its name, fixed before anything runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from empirical.bridge.ladder_dynamics.config import RELEASES, DynamicsConfig
from empirical.bridge.ladder_dynamics.variants import ladder_variants
from empirical.config.io import ConfigError, load_config


@dataclass(frozen=True)
class RaceConfig:
    """name: as in race.json; releases: the ladder's releases; overrides: dotted
    `DynamicsConfig` fields (applied after the command's own)."""

    name: str
    releases: tuple[str, ...]
    overrides: tuple[str, ...] = ()

    @property
    def split(self) -> str:
        return split_of(self.name)


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


def race_configs() -> list[RaceConfig]:
    """The configurations of docs/race.md, in its order: the ladder's 14 variants, rates,
    sizes, logit scale and start, factors."""
    ladder = [RaceConfig(name, rel) for name, rel in ladder_variants(list(RELEASES))]
    out = ladder + _rates() + _sizes() + _scales() + _factors()
    assert len({c.name for c in out}) == len(out)
    return out


def dynamics_config(rc: RaceConfig, overrides: list[str] | None = None) -> DynamicsConfig:
    """The ladder config of one race configuration: the defaults, the command's `overrides`,
    then the configuration's own, with `releases` = exactly its releases (so that the
    populations its data need are built)."""
    mine = [*(overrides or []), *rc.overrides, f"releases={json.dumps(list(rc.releases))}"]
    try:
        return load_config(DynamicsConfig, None, mine)
    except ConfigError as exc:
        raise ConfigError(f"race configuration {rc.name!r}: {exc}") from None


def select(names: list[str] | None) -> list[RaceConfig]:
    """The configurations called `names` (all when None), in race order; an unknown name is
    a ConfigError listing the known ones."""
    every = race_configs()
    if not names:
        return every
    known = {c.name: c for c in every}
    for n in names:
        if n not in known:
            raise ConfigError(f"--only: {n!r} is not a race configuration; known: "
                              f"{', '.join(known)}")  # fmt: skip
    return [c for c in every if c.name in set(names)]
