"""The three suites: what each measures and with which systems."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from . import real, synthetic
from .systems import PEERS


@dataclass(frozen=True)
class Suite:
    synthetic: tuple[synthetic.Setting, ...]
    real: tuple[real.Setting, ...]
    variants: tuple[str, ...]
    peers: tuple[str, ...]
    truth_iterations: int = 500


#: The separable family (benchmarks/quality/truths.py): V = 2,000 words, three draws of the topics.
SEPARABLE = ("separable-2000-s0", "separable-2000-s1", "separable-2000-s2")


def _grid(corpora, topics, alphas, checkpoints):
    return tuple(synthetic.Setting(c, k, a, checkpoints) for c, k, a in product(corpora, topics, alphas))


SUITES = {
    # CI: one Gibbs-truth stream, one separable stream and one real split, our defaults only; about a minute.
    "quick": Suite(synthetic=(synthetic.Setting("20newsgroups", 20, 0.03, (5_000, 20_000)),
                              synthetic.Setting("separable-2000-s0", 20, 0.1, (20_000, 50_000))),
                   real=(real.Setting("20newsgroups", 20),), variants=("default",), peers=()),
    "standard": Suite(synthetic=_grid(("20newsgroups", "reuters", "debian"), (20, 50), (0.03, 0.1),
                                      (5_000, 20_000, 50_000, 100_000))
                      + _grid(SEPARABLE, (20, 50), (0.03, 0.1), (20_000, 50_000)),
                      real=tuple(real.Setting(c, 20) for c in ("20newsgroups", "reuters", "nips", "bbc")),
                      variants=("default", "rp", "hybrid", "norefine", "anchorsonly"), peers=PEERS),
    "full": Suite(synthetic=_grid(("20newsgroups", "reuters", "debian", "nips"), (20, 50, 100), (0.03, 0.1),
                                  (5_000, 20_000, 50_000, 100_000, 200_000))
                  + _grid(SEPARABLE, (20, 50), (0.03, 0.1), (20_000, 50_000)),
                  real=tuple(real.Setting(c, k) for c in ("20newsgroups", "reuters", "nips", "bbc") for k in (20, 50)),
                  variants=("default", "rp", "hybrid", "norefine", "cap3000", "nobg"), peers=PEERS),
}
