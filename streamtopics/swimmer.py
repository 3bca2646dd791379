"""The swimmer images (Donoho & Stodden 2004), as a topic-model corpus (Ding et al. 2013, 6.2).

A swimmer is a 32 x 32 binary image: a torso (a vertical bar, the same in every image) and four
limbs, each in one of four positions, so 4^4 = 256 images. Pixels are words (V = 1024), images
are documents, and the K = 16 topics are the limb positions. Every limb position has pixels of its
own, so the topics are separable, but the images span only 13 dimensions (one torso plus 4 x 3
independent limb changes): the extreme points of the data are linearly dependent, which breaks
anchor methods that need K linearly independent anchor rows (Arora et al.'s RecoverL2) but not
Ding et al.'s random projections.

Drawing: the torso is a 2 x 10 bar in the middle; each limb is a 7-pixel straight segment leaving
a corner of the torso in one of four of the eight compass directions (arms point up, diagonally
up, sideways, diagonally down; legs diagonally up, sideways, diagonally down, down). All 16
segments and the torso are pairwise disjoint and every limb position has the same number of
pixels, so each image's pixel distribution is exactly the average of its four limb topics.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .evaluation import matched_l1_per_topic
from .synthetic import sample_documents

__all__ = [
    "swimmer_images",
    "swimmer_proportions",
    "swimmer_limb_topics",
    "swimmer_corpus_distributions",
    "swimmer_corpus",
    "swimmer_clean_corpus",
    "limbs_recovered",
]

SIZE = 32
N_LIMBS = 4
N_POSITIONS = 4
LIMB_LENGTH = 7
_TORSO_ROWS = slice(11, 21)
_TORSO_COLS = slice(15, 17)
# (joint pixel, four unit steps) per limb: left arm, right arm, left leg, right leg.
_LIMBS = (
    ((11, 15), ((-1, 0), (-1, -1), (0, -1), (1, -1))),
    ((11, 16), ((-1, 0), (-1, 1), (0, 1), (1, 1))),
    ((20, 15), ((-1, -1), (0, -1), (1, -1), (1, 0))),
    ((20, 16), ((-1, 1), (0, 1), (1, 1), (1, 0))),
)


def _torso() -> np.ndarray:
    mask = np.zeros((SIZE, SIZE), dtype=bool)
    mask[_TORSO_ROWS, _TORSO_COLS] = True
    return mask.ravel()


def _limb_masks() -> np.ndarray:
    """16 x 1024 boolean masks, limb-major (column ``4 * limb + position``)."""
    steps = np.arange(1, LIMB_LENGTH + 1)
    masks = np.zeros((N_LIMBS * N_POSITIONS, SIZE, SIZE), dtype=bool)
    for limb, ((row, col), directions) in enumerate(_LIMBS):
        for position, (d_row, d_col) in enumerate(directions):
            masks[N_POSITIONS * limb + position, row + d_row * steps, col + d_col * steps] = True
    return masks.reshape(N_LIMBS * N_POSITIONS, SIZE * SIZE)


def swimmer_proportions() -> np.ndarray:
    """The 256 x 16 topic proportions: 1/4 on each of an image's four limb positions.

    Image ``i`` has limb ``l`` in position ``(i // 4 ** (3 - l)) % 4`` (limb 0 varies slowest).
    """
    positions = np.indices((N_POSITIONS,) * N_LIMBS).reshape(N_LIMBS, -1).T  # 256 x 4
    proportions = np.zeros((len(positions), N_LIMBS * N_POSITIONS))
    rows = np.arange(len(positions))[:, None]
    proportions[rows, N_POSITIONS * np.arange(N_LIMBS) + positions] = 1.0 / N_LIMBS
    return proportions


def swimmer_images() -> np.ndarray:
    """The 256 clean binary images, one per row (256 x 1024, float64 0/1, row-major pixels).

    >>> images = swimmer_images()
    >>> images.shape, int(np.linalg.matrix_rank(images))
    ((256, 1024), 13)
    """
    limbs = (swimmer_proportions() > 0).astype(float) @ _limb_masks()
    return limbs + _torso()


def swimmer_limb_topics(body_weight: float = 10.0, background_weight: float = 1.0) -> np.ndarray:
    """The 16 ground-truth topics (1024 x 16, columns sum to 1), limb-major as in
    :func:`swimmer_proportions`.

    Following Ding et al. (after Tan & Fevotte), an image's pixel distribution is proportional to
    ``body_weight`` on body pixels and ``background_weight`` elsewhere. Topic ``(l, p)`` is
    proportional to ``(body_weight - background_weight)`` on the pixels of limb ``l`` in position
    ``p`` plus a quarter of what every image shares (the background at ``background_weight`` and
    the torso at ``body_weight``); then each image's distribution is exactly the average of its
    four limb topics. ``background_weight=0`` gives the clean, exactly separable topics (a limb
    position plus a quarter of the torso), whose anchors are the limb's pixels. With a background
    the limb pixels also carry weight ``background_weight / 4`` in every other topic, so the noisy
    corpus is only nearly separable.

    >>> topics = swimmer_limb_topics()
    >>> bool(np.allclose(swimmer_proportions() @ topics.T, swimmer_corpus_distributions()))
    True
    """
    shared = background_weight + (body_weight - background_weight) * _torso()
    topics = shared[:, None] / N_LIMBS + (body_weight - background_weight) * _limb_masks().T
    return topics / topics.sum(axis=0)


def swimmer_corpus_distributions(
    body_weight: float = 10.0, background_weight: float = 1.0
) -> np.ndarray:
    """Each image's pixel distribution (256 x 1024): ``body_weight`` on body pixels,
    ``background_weight`` elsewhere, normalised."""
    images = swimmer_images()
    weights = background_weight + (body_weight - background_weight) * images
    return weights / weights.sum(axis=1, keepdims=True)


def swimmer_corpus(
    n_docs: int = 256,
    n_words_per_doc: int = 200,
    body_weight: float = 10.0,
    background_weight: float = 1.0,
    seed: int | np.random.Generator = 0,
) -> sp.csr_matrix:
    """The noisy swimmer corpus of Ding et al.: ``n_words_per_doc`` pixels ("words") drawn
    i.i.d. from each image's distribution (:func:`swimmer_corpus_distributions`).

    Document ``d`` is image ``d % 256``, so ``n_docs > 256`` repeats the images with fresh noise.
    Returns ``n_docs`` x 1024 counts.

    >>> corpus = swimmer_corpus(n_docs=512, seed=1)
    >>> corpus.shape, np.unique(corpus.sum(axis=1)).tolist()
    ((512, 1024), [200.0])
    """
    proportions = swimmer_proportions()
    image = np.arange(n_docs) % len(proportions)
    topics = swimmer_limb_topics(body_weight, background_weight)
    return sample_documents(topics, proportions[image], n_words_per_doc, seed=seed)


def swimmer_clean_corpus() -> sp.csr_matrix:
    """The 256 clean images as Ding et al. use them: each image a document of its body pixels
    (torso and four limbs), each pixel once (256 x 1024 counts of 0/1)."""
    return sp.csr_matrix(swimmer_images())


def limbs_recovered(topic_word: np.ndarray) -> int:
    """How many of the 16 limb positions an estimate recovers (``topic_word``: 1024 x K), each
    matched to a distinct estimated topic.

    Compared on the limb pixels only, renormalised: the other pixels (background and torso) are
    the same in all 16 topics and their split among the topics is not identifiable from this
    corpus (the 256 images' proportions have rank 13 < 16: moving a little of a background pixel's
    mass from the four positions of one limb to the four of another leaves every image unchanged),
    so correctly anchored topics stay 0.4-0.5 from the truth in full L1, while two true topics are
    0.35 apart. On the limb pixels the true topics are 1.385 apart (L1, every pair); an estimate
    within half of that of its matched limb is nearer it than any other limb (triangle
    inequality), and counts as recovered. Correctly anchored topics land at 0.42-0.54, topics
    anchored off the limbs at 1.1-2.0.

    >>> limbs_recovered(swimmer_limb_topics())
    16
    """
    truth = swimmer_limb_topics()
    limb = _limb_masks().any(axis=0)
    true_limb = truth[limb] / truth[limb].sum(axis=0)
    estimate = np.asarray(topic_word, dtype=np.float64)[limb]
    estimate = estimate / np.maximum(estimate.sum(axis=0), 1e-300)
    return int((matched_l1_per_topic(true_limb, estimate) < LIMB_MATCH_L1).sum())


#: Half the L1 distance between two limb positions' topics on the limb pixels (1.385).
LIMB_MATCH_L1 = 0.6923
