"""Semi-synthetic streams from a :class:`~.truths.Truth` (Arora et al. 2013, section 5.1, with
the corpus's own document lengths instead of a fixed one).

Mixtures are symmetric Dirichlet(alpha) draws; lengths are drawn with replacement from the
truth corpus's training-document lengths (documents of fewer than 2 tokens left out: they carry
no co-occurrence); both from ``numpy.random.default_rng(seed)``, tokens from
:func:`streamtopics.synthetic.semi_synthetic`. A setting draws its stream once, at its largest
checkpoint, and every checkpoint reads a prefix of it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamtopics.synthetic import semi_synthetic

from .truths import Truth


def draw(truth: Truth, n_docs: int, alpha: float, seed: int = 1) -> sp.csr_matrix:
    """``n_docs`` documents (M x V counts) from ``truth`` with Dirichlet(``alpha``) mixtures."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice(truth.lengths[truth.lengths >= 2], size=n_docs, replace=True)
    documents, _ = semi_synthetic(truth.topic_word, n_docs, alpha=alpha, doc_length=lengths, seed=rng)
    return documents
