"""The quick and full suites: which streams, which K, how long, and the per-system time budgets."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # "semi" or "real"
    corpus: str
    n_topics: int
    n_docs: int = 0  # semi-synthetic stream length (real streams: the whole training part)
    alpha: float = 0.03
    n_heldout: int = 1000
    checkpoints: tuple = ()


@dataclass(frozen=True)
class Suite:
    settings: tuple
    systems: tuple = ("ours", "gensim", "sklearn", "river", "tomotopy")
    budget_s: dict = field(default_factory=dict)  # per system: the fit is cut past this many seconds
    repeat_if_under_s: float = 30.0  # repeat a fit (median of 3) only when one fit takes less
    tomotopy_iterations: int = 200


QUICK = Suite(
    settings=(
        Setting("kos-K20-a0.03-10k", "semi", "uci-kos", 20, 10_000, 0.03, 500, (1000, 2000, 5000)),
        Setting("20news-K20", "real", "20newsgroups-bydate", 20, n_heldout=500),
    ),
    budget_s={"ours": 300, "gensim": 120, "sklearn": 120, "river": 30, "tomotopy": 60},
    repeat_if_under_s=15.0,
    tomotopy_iterations=200,
)

# Semi-synthetic streams of 200k documents; the L1 curve is read at prefixes (10k, 50k, ... are
# checkpoints of one stream rather than separate streams). Settings are listed in the order they
# are run, most informative first, so that a run cut short still covers the main cases.
_SEMI = [(corpus, tag, k, alpha) for alpha in (0.03, 0.1) for k in (20, 100)
         for corpus, tag in (("uci-kos", "kos"), ("nips17-bow", "nips"))]
_CHECKPOINTS = (1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)


def _semi(corpus, tag, k, alpha):
    return Setting(f"{tag}-K{k}-a{alpha}-200k", "semi", corpus, k, 200_000, alpha, 1000, _CHECKPOINTS)


FULL = Suite(
    settings=(
        _semi("uci-kos", "kos", 20, 0.03),
        Setting("20news-K20", "real", "20newsgroups-bydate", 20, n_heldout=1000),
        Setting("reuters-K20", "real", "reuters21578", 20, n_heldout=1000),
        _semi("uci-kos", "kos", 100, 0.03),
        Setting("debian-K50", "real", "debian-descriptions", 50, n_heldout=1000),
        _semi("uci-kos", "kos", 20, 0.1),
        _semi("uci-kos", "kos", 100, 0.1),
        _semi("nips17-bow", "nips", 20, 0.03),
        _semi("nips17-bow", "nips", 100, 0.03),
        _semi("nips17-bow", "nips", 20, 0.1),
        _semi("nips17-bow", "nips", 100, 0.1),
    ),
    # the rule: a peer that cannot finish a setting in 20 minutes is cut there
    budget_s={"ours": 1200, "gensim": 1200, "sklearn": 1200, "river": 1200, "tomotopy": 1200},
    repeat_if_under_s=60.0,
    tomotopy_iterations=500,
)

SUITES = {"quick": QUICK, "full": FULL}
