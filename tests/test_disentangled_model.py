"""Basis, configuration, Fourier MLP and the dense model of eq. (2)."""

import itertools
import math

import pytest
import torch

from disentangled import Basis, ConfigError, SimConfig, attention, fourier_mlp, initial_W
from disentangled.model import fourier_mlp_conv
from disentangled.population import iter_population


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("p", [3, 4, 5, 7, 11])
def test_fourier_identities(p):
    eye = torch.eye(p, dtype=torch.float64)
    y = torch.arange(p)
    for a, b in itertools.product(range(p), repeat=2):
        F = fourier_mlp((eye[a] + eye[b])[None], p)[0]
        expected = (
            2.0 * (y == (a + b) % p) + 1.0 * (y == (2 * a) % p) + 1.0 * (y == (2 * b) % p)
        ).double()
        torch.testing.assert_close(F, expected, atol=1e-12, rtol=0)
    for a in range(p):
        F = fourier_mlp(eye[a][None], p)[0]
        torch.testing.assert_close(F, (y == (2 * a) % p).double(), atol=1e-12, rtol=0)


@pytest.mark.parametrize("p", [3, 6, 13])
def test_fourier_complex_equals_convolution(p):
    h = torch.randn(20, p, dtype=torch.float64, generator=torch.Generator().manual_seed(p))
    torch.testing.assert_close(fourier_mlp(h, p), fourier_mlp_conv(h, p), atol=1e-12, rtol=0)
    assert fourier_mlp(h, p).dtype == torch.float64


def test_basis_order_and_reading():
    b = Basis(5, 3, 16)
    assert b.labels[:8] == ["n0", "n1", "n2", "n3", "n4", "v0", "v1", "v2"]
    assert b.labels[8:11] == ["=", "+", "pad"]
    assert b.labels[11:27] == [f"pos{t}" for t in range(16)]
    assert b.labels[27:] == [f"bar_n{m}" for m in range(5)] + ["bar_v0", "bar_v1", "bar_v2"]
    assert b.dim == len(b.labels) == len(set(b.labels)) == 35
    for i, lab in enumerate(b.labels):
        assert b.index(lab) == i
        v = b.vector(lab)
        assert v.dtype == torch.float64 and v.sum() == 1 and v[i] == 1
    assert b.eq == b.index("=") and b.pos(14) == b.index("pos14")
    assert b.bar_v(2) == b.index("bar_v2") and b.bar_n(4) == b.index("bar_n4")
    M = torch.zeros(b.dim, b.dim, dtype=torch.float64)
    M[b.index("bar_v1"), b.index("pos3")] = -2.5
    M[b.index("="), b.index("n0")] = 1.0
    assert b.entry(M, "bar_v1", "pos3") == -2.5
    assert b.block(M, ["bar_v1", "="], ["pos3", "n0"]).tolist() == [[-2.5, 0.0], [0.0, 1.0]]
    assert b.largest_entries(M, 2) == [("bar_v1", "pos3", -2.5), ("=", "n0", 1.0)]
    with pytest.raises(KeyError):
        b.index("pos16")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"p": 2}, "p"),
        ({"K": 1}, "K"),
        ({"K": 7}, "K"),
        ({"L": 12, "K": 5}, "K"),
        ({"L": 7}, "L"),
        ({"beta": float("nan")}, "beta"),
        ({"beta": float("inf")}, "beta"),
        ({"operand_order": "sideways"}, "operand_order"),
        ({"p": 5.0}, "p"),
    ],
)
def test_config_validation_names_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        SimConfig(**kwargs)
    assert err.value.field == field
    assert field in str(err.value)


def test_config_accepts_edges():
    SimConfig(p=3, K=6)  # 2K = 12 = L - 4
    SimConfig(L=8, K=2)
    assert SimConfig(L=20).operand_pos == (17, 18)


@pytest.mark.parametrize("cfg", [SimConfig(), SimConfig(p=3, K=2, beta=2.5, L=10)])
def test_initial_normaliser_is_constant(cfg):
    """At W0 every sequence has scores beta at the operands and 0 elsewhere, so
    Z = 2 e^beta + (L - 2) for every sequence (the paper's footnote)."""
    W0 = initial_W(cfg)
    b = Basis.from_config(cfg)
    assert torch.count_nonzero(W0) == 2
    assert b.entry(W0, "=", f"pos{cfg.L - 3}") == b.entry(W0, "=", f"pos{cfg.L - 2}") == cfg.beta
    Z = 2 * math.exp(cfg.beta) + cfg.L - 2
    for kind in ("0var", "1var", "2var"):
        for chunk in iter_population(cfg, kind, chunk_size=2000):
            X = chunk.inputs
            scores = torch.einsum("nd,de,nte->nt", X[:, -1], W0, X)
            torch.testing.assert_close(
                scores.exp().sum(1), torch.full((X.shape[0],), Z, dtype=torch.float64)
            )
            sigma = attention(W0, X)
            a = math.exp(cfg.beta) / Z
            torch.testing.assert_close(sigma[:, -3], torch.full_like(sigma[:, 0], a))
