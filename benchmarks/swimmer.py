"""Limbs recovered on Ding et al.'s swimmer test (2013, section 6.3), per anchor selector.

The 256 swimmer images (:mod:`streamtopics.swimmer`): a torso and four limbs in four positions
each, 16 limb topics over 1,024 pixel "words". Corpora:

  clean   each image once, a document of its 48 body pixels (Ding et al.'s setting);
  N       each image once, N pixels drawn from it (body pixels weigh 10, the rest 1; Tan &
          Fevotte's noisy swimmer, as in Ding et al.'s figures), one corpus per seed.

Each corpus goes through ``StreamingTopicModel(16, anchor_method=...)`` (every other setting at
its default): ``learn_many`` over the 256 documents, one ``refresh()``. A limb counts as
recovered when a distinct topic is within half the limbs' distance of it on the limb pixels
(:func:`streamtopics.swimmer.limbs_recovered`). "default" is the default ``anchor_method``.
Ding et al. report all 16 limbs for their random projections (RP) and data-dependent projections
(DDP), and RecoverL2 failing on the clean images already.

    python -m benchmarks.swimmer                          # clean, 200, 500, 2000 pixels; seeds 0-4
    python -m benchmarks.swimmer --pixels 200 --seeds 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.config import ModelConfig
from streamtopics.swimmer import limbs_recovered, swimmer_clean_corpus, swimmer_corpus

SELECTORS = ("default", "fastanchors", "rp", "hybrid")
DING_ET_AL = "16 (RP, DDP)"


def recovered(documents, selector: str) -> int:
    """Limbs recovered by one model with ``selector`` over ``documents`` (256 x 1024 counts)."""
    options = {} if selector == "default" else {"anchor_method": selector}
    model = StreamingTopicModel(16, vocabulary=[f"p{i}" for i in range(documents.shape[1])], **options)
    model.learn_many(documents)
    return limbs_recovered(model.refresh().topic_word)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", nargs="+", default=["clean", "200", "500", "2000"],
                        help="corpora: 'clean' and/or pixels drawn per image")
    parser.add_argument("--seeds", type=int, default=5, help="noisy corpora per pixel count (seeds 0..n-1)")
    args = parser.parse_args()
    print(f"default anchor_method: {ModelConfig().anchor_method}; limbs recovered of 16 "
          f"(min / median over seeds; the seeds' counts)")
    print(f"{'corpus':>8} | " + " | ".join(f"{s:>22}" for s in SELECTORS) + f" | Ding et al.")
    for corpus in args.pixels:
        seeds = [None] if corpus == "clean" else range(args.seeds)
        found = {s: [] for s in SELECTORS}
        start = time.perf_counter()
        for seed in seeds:
            documents = (swimmer_clean_corpus() if corpus == "clean"
                         else swimmer_corpus(n_docs=256, n_words_per_doc=int(corpus), seed=seed))
            for selector in SELECTORS:
                found[selector].append(recovered(documents, selector))
        cells = [f"{min(v):>2} / {np.median(v):>4.1f} {','.join(map(str, v)):>12}" for v in found.values()]
        print(f"{corpus:>8} | " + " | ".join(f"{c:>22}" for c in cells) + f" | {DING_ET_AL}"
              f"   ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
