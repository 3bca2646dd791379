"""The three anchor selectors (fastanchors, rp, hybrid) behind StreamingTopicModel(anchor_method=...):
planted anchors on separable corpora, the swimmer corpus of Ding et al., tracker persistence."""

from __future__ import annotations

import numpy as np
import pytest

from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.refresh.anchor_selection import select_anchors
from streamtopics.refresh.recovery import recover_topics
from streamtopics.swimmer import limbs_recovered, swimmer_clean_corpus, swimmer_corpus, swimmer_limb_topics
from streamtopics.synthetic import semi_synthetic, separable_topics
from streamtopics.statistics.trackers import RandomProjectionTracker, n_projections_for_topics

METHODS = ("fastanchors", "rp", "hybrid")


def anchors_of(model, method):
    """What model.refresh() would select with `method`, on the model's statistics and tracker."""
    return select_anchors(model.statistics(), model.n_topics, model.min_document_frequency(),
                          model.anchor_candidate_limit(), model.projection_dim, model.anchor_cleanup,
                          model.seed, method=method, tracker=model.tracker, min_support=model.rp_min_support)


# ------------------------------------------------------------------------------------------------
# separable synthetic corpora: one anchor per true topic once M is large enough
# ------------------------------------------------------------------------------------------------

SV, SK = 1000, 20
GRID = (250, 500, 750, 1000, 2000)
# Smallest M of GRID from which a selector finds one planted anchor per topic at every later
# size, on each of the three streams below (separable_topics(1000, 20, anchor_mass=0.05),
# Dirichlet(0.1), 100-token documents, default options; the sizes are prefixes of one stream).
# Measured, topics found on streams 0/1/2 at 250 / 500 / 750 (and every later size: 20/20/20):
#   fastanchors  7/3/5   20/19/17  20/20/20  -> M = 750
#   rp          18/20/13 20/20/20  20/20/20  -> M = 500
#   hybrid      12/10/6  20/20/19  20/20/20  -> M = 750
# At 500 fastanchors misses 0-3 topics per stream, hybrid 0-1. rp tests a word's noise pooled with its 3 nearest
# neighbours' too (a topic's 5 planted anchors share one row): with each word's own noise test alone it was
# complete from 750 (15/16/13 and 20/18/19 at 250 and 500).
FOUND_FROM = {"fastanchors": 750, "rp": 500, "hybrid": 750}


@pytest.fixture(scope="module")
def separable():
    truth = separable_topics(SV, SK, anchor_mass=0.05, seed=11)
    owner = {int(a): k for k in range(SK) for a in truth.anchors[k]}
    words = [f"w{i}" for i in range(SV)]
    found = {m: np.zeros((3, len(GRID)), int) for m in METHODS}
    for stream in range(3):
        docs, _ = semi_synthetic(truth.topic_word, GRID[-1], alpha=0.1, doc_length=100, seed=stream)
        model = StreamingTopicModel(SK, vocabulary=words, anchor_method="hybrid")  # keeps a tracker
        seen = 0
        for g, size in enumerate(GRID):
            model.learn_many(docs[seen:size])
            seen = size
            for method in METHODS:
                anchors = anchors_of(model, method)
                assert len(set(anchors.tolist())) == SK
                found[method][stream, g] = len({owner[int(a)] for a in anchors if int(a) in owner})
    return truth, words, found


@pytest.mark.parametrize("method", METHODS)
def test_every_selector_finds_one_anchor_per_topic_once_m_is_large_enough(separable, method):
    _, _, found = separable
    perfect = (found[method] == SK).all(axis=0)  # per size, on every stream
    first = next(GRID[g] for g in range(len(GRID)) if perfect[g:].all())
    assert first == FOUND_FROM[method], found[method]
    assert not perfect[0], "the smallest size should be too small for every selector"


def test_every_method_runs_from_the_model(separable):
    truth, words, _ = separable
    docs, _ = semi_synthetic(truth.topic_word, 2000, alpha=0.1, doc_length=100, seed=5)
    snapshots = {}
    for method in METHODS:
        model = StreamingTopicModel(SK, vocabulary=words, anchor_method=method)
        model.learn_many(docs)
        assert (model.tracker is None) == (method == "fastanchors")
        snapshots[method] = model.refresh()
    planted = sorted(words[a] for a in truth.anchors.ravel())
    for method, snapshot in snapshots.items():
        assert sorted(snapshot.anchors) == planted, method
        assert matched_l1(truth.topic_word, snapshot.topic_word) < 0.5  # measured 0.42 (2,000 short documents)
    # same anchors, same topics (the order of the columns may differ)
    for method in ("rp", "hybrid"):
        assert matched_l1(snapshots["fastanchors"].topic_word, snapshots[method].topic_word) < 1e-3


def test_options_and_fallbacks(separable):
    truth, words, _ = separable
    with pytest.raises(ValueError):
        StreamingTopicModel(SK, vocabulary=words, anchor_method="nope")
    model = StreamingTopicModel(SK, vocabulary=words, anchor_method="rp")
    assert model.tracker.n_projections == n_projections_for_topics(SK) == 256
    assert StreamingTopicModel(SK, vocabulary=words, anchor_method="rp", n_projections=32).tracker.n_projections == 32
    docs, _ = semi_synthetic(truth.topic_word, 1000, alpha=0.1, doc_length=100, seed=6)
    model.learn_many(docs)
    with pytest.raises(ValueError):
        select_anchors(model.statistics(), SK, 5, method="rp")  # no tracker
    # A tracker with 2 directions has at most 4 candidates: rp completes its groups with
    # farthest-point steps, hybrid with the most frequent eligible words; both return K words.
    tiny = RandomProjectionTracker(SV, n_projections=2, seed=0)
    stats = model.statistics()
    tiny.update(docs.indptr, docs.indices, docs.data, np.arange(docs.shape[0], dtype=np.uint64))
    assert tiny.candidates().size <= 4
    for method in ("rp", "hybrid"):
        anchors = select_anchors(stats, SK, model.min_document_frequency(), 3000, 1000, True, 0,
                                 method=method, tracker=tiny)
        assert anchors.size == SK and np.unique(anchors).size == SK
    # group-averaged anchor rows: groups of one word are the plain anchor rows
    anchors = anchors_of(model, "rp")
    plain = recover_topics(stats, anchors)
    grouped = recover_topics(stats, anchors, anchor_groups=[[a] for a in anchors])
    np.testing.assert_allclose(grouped.topic_word, plain.topic_word, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# the swimmer corpus (Ding et al. 6.2): linearly dependent extreme points
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def swimmer():
    words = [f"p{i}" for i in range(swimmer_limb_topics().shape[0])]
    found = {}
    for n_docs in (256, 1024):
        docs = swimmer_corpus(n_docs=n_docs, seed=0)
        for method in METHODS:
            model = StreamingTopicModel(16, vocabulary=words, anchor_method=method)
            model.learn_many(docs)
            found[method, n_docs] = limbs_recovered(model.refresh().topic_word)
    return found


def test_swimmer_rp_and_hybrid_recover_the_limbs(swimmer):
    # 1,024 documents: every image four times with fresh noise (N = 200 pixels each), default
    # options.  rp and hybrid anchor all 16 limb positions (measured on seeds 0-2: rp recovers
    # 16/16/16 topics, hybrid 16/16/15); fastanchors anchors 14/14/13 limb positions (the rest are
    # background or torso pixels) and recovers 15/14/14 topics (a topic anchored off the limbs
    # can still land near the one limb left over).  Ding et al. report that Arora's selector
    # fails here; ours mostly does not, once every image is seen a few times.  With the
    # rectified candidates' block (the default since issue 14) fastanchors recovers 14 on seed 0
    # (15 when the candidates reached past the 1,000 most frequent of the 1,024 pixels on any lower
    # residual; refresh/candidate_depth.py now asks for 1 % less).
    assert swimmer["rp", 1024] >= 15
    assert swimmer["hybrid", 1024] >= 15
    assert swimmer["rp", 1024] == 16 and swimmer["hybrid", 1024] == 16  # for the record
    assert swimmer["fastanchors", 1024] >= 13  # most limbs even so (14 when written)


def test_swimmer_at_dings_size(swimmer):
    # Ding et al.'s exact setting, 256 documents (each image once, 200 noisy pixels), default
    # options (issue 45). Rare background pixels (in ~13% of the images) have rows of pure sampling
    # noise whose random projections are extreme: the trackers' candidates keep only rows that stand
    # out from their noise by SIGNAL_Z standard errors (rp's pooled with their nearest neighbours'), and
    # rp and hybrid anchor all 16 limbs on seed 0 (`python -m benchmarks.swimmer --seeds 12`: rp 16 on
    # seeds 0-11, hybrid too since it takes rp's anchors where rp's groups stand apart, 16 on 8 of them
    # and 15, 15, 13, 11 before; before the noise rule 9-11 and 6-10). fastanchors recovers 14 (it searches
    # the rectified candidates' block; the trackers' rule does not touch it), 13 since the
    # refinement is skipped where the anchors fit the sums to within their noise (the swimmer measures
    # 1.16-1.45 of refresh/separability.py's ratio): the topics recovered are closer to the limb topics
    # (L1 0.92 against 1.02 refined, seeds 0-2) and score higher on held-out pixels, but the refined
    # ones' ten top pixels lie on one more limb.
    assert swimmer["rp", 256] >= 15
    assert swimmer["hybrid", 256] >= 15
    assert swimmer["fastanchors", 256] >= 12  # most limbs even so (13 when written)


@pytest.mark.parametrize("method", ["rp", "hybrid"])
@pytest.mark.parametrize("seed", [5, 8, 11])
def test_tracker_selectors_on_swimmer_draws_with_a_faint_limb(seed, method):
    # Draws where one word's own noise test failed (issue 45): on seeds 5 and 8 no pixel of one limb
    # reached z = 5 (max 4.7, 4.8), on seed 11 a background pixel did (5.1); rp anchored 14, 14, 13
    # limbs. Pooled with its 3 nearest neighbours every limb has a pixel at 6.4, 6.7, 8.8 or more
    # there, no background pixel above 3.1, 3.3, 4.3: rp 16 on all three. hybrid's FastAnchorWords
    # over single pixels' rows took a noisier second pixel of one limb over the faint limb's (13, 11
    # and 15 limbs); rp's candidates fall into 16 groups set apart there (group_separation 1.69, 1.59,
    # 1.90 >= GROUP_SEPARATION), so hybrid takes rp's anchors: 16 on all three.
    words = [f"p{i}" for i in range(1024)]
    model = StreamingTopicModel(16, vocabulary=words, anchor_method=method)
    model.learn_many(swimmer_corpus(n_docs=256, n_words_per_doc=200, seed=seed))
    assert limbs_recovered(model.refresh().topic_word) >= 15


@pytest.mark.parametrize("method", ["rp", "hybrid"])
def test_swimmer_clean_images(method):
    # Ding et al.'s clean images: each a document of its 48 body pixels, each pixel once. No word
    # repeats in a document, so the trackers have no noise estimate: the candidates fall back on the
    # raw projections and the support mask on document frequency (before: hybrid 4 limbs, rp 16)
    words = [f"p{i}" for i in range(1024)]
    model = StreamingTopicModel(16, vocabulary=words, anchor_method=method)
    model.learn_many(swimmer_clean_corpus())
    assert limbs_recovered(model.refresh().topic_word) >= 15  # measured 16 for both


# ------------------------------------------------------------------------------------------------
# the tracker lives in the model: save / load / resume / merge
# ------------------------------------------------------------------------------------------------


def test_tracker_save_load_resume_equals_uninterrupted(tmp_path, separable):
    truth, words, _ = separable
    docs, _ = semi_synthetic(truth.topic_word, 3000, alpha=0.1, doc_length=100, seed=7)
    options = dict(vocabulary=words, anchor_method="rp", batch_size=211, refresh_every=1000)
    whole = StreamingTopicModel(SK, **options)
    whole.learn_many(docs)
    final = whole.refresh()

    part = StreamingTopicModel(SK, **options)
    part.learn_many(docs[:1300])
    part.save(tmp_path / "a.state")
    part = StreamingTopicModel.load(tmp_path / "a.state")
    assert part.anchor_method == "rp" and part.tracker is not None
    part.learn_many(docs[1300:2500])
    part.save(tmp_path / "b.state")
    part = StreamingTopicModel.load(tmp_path / "b.state")
    part.learn_many(docs[2500:])
    resumed = part.refresh()

    a, b = part.tracker, whole.tracker
    assert (a.n_docs, a.seed, a.n_projections) == (b.n_docs, b.seed, b.n_projections) == (3000, 0, 256)
    for name in ("S", "T", "U", "P"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(part.statistics().packed, whole.statistics().packed)
    assert resumed.to_json() == final.to_json()


def test_merged_models_merge_their_trackers(separable):
    truth, words, _ = separable
    docs, _ = semi_synthetic(truth.topic_word, 1500, alpha=0.1, doc_length=100, seed=8)
    whole = StreamingTopicModel(SK, vocabulary=words, anchor_method="hybrid")
    whole.learn_many(docs)
    left = StreamingTopicModel(SK, vocabulary=words, anchor_method="hybrid")
    right = StreamingTopicModel(SK, vocabulary=words, anchor_method="hybrid")
    left.learn_many(docs[:600])
    right.learn_many(docs[600:])
    left.merge(right)
    whole.statistics()  # flushes the buffered documents into the sums
    assert left.tracker.n_docs == whole.tracker.n_docs == 1500
    for name in ("S", "T", "U", "P"):  # equal up to the order of the additions
        np.testing.assert_allclose(getattr(left.tracker, name), getattr(whole.tracker, name), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError):
        left.merge(StreamingTopicModel(SK, vocabulary=words))  # no tracker on one side


def test_sticky_anchors_keep_a_previous_anchor_unless_a_word_is_clearly_farther():
    from streamtopics.refresh.anchors import fast_anchor_words

    vertices = np.eye(3)
    inner = 0.95 * vertices[2] + 0.025 * (vertices[0] + vertices[1])  # the last refresh's anchor
    rows = np.vstack([vertices, inner, [[0.4, 0.3, 0.3], [0.2, 0.5, 0.3]]])
    assert sorted(fast_anchor_words(rows, 3).tolist()) == [0, 1, 2]  # afresh: the true vertex
    kept = fast_anchor_words(rows, 3, keep=[3, 0, 1], stickiness=0.1)
    assert sorted(kept.tolist()) == [0, 1, 3]  # < 10% farther: the previous anchor stays
    assert sorted(fast_anchor_words(rows, 3, keep=[3, 0, 1], stickiness=0.01).tolist()) == [0, 1, 2]
    # a previous anchor no longer extreme at all is replaced whatever the margin
    middle = np.vstack([vertices, [[0.34, 0.33, 0.33]]])
    assert sorted(fast_anchor_words(middle, 3, keep=[3, 0, 1], stickiness=0.5).tolist()) == [0, 1, 2]


def test_rows_spanning_fewer_directions_than_the_resolution_are_refused_not_padded_with_rounding():
    """Rows of three directions plus noise below the ``resolution``: a fourth anchor would follow the
    noise (the basis no longer orthogonal, the re-selection pass then returned one row for several
    anchors), so the search says the rows run out; noise above it is a direction, and without a
    resolution (raw rows, where small directions are real) the search picks four distinct rows."""
    from streamtopics.refresh.anchors import DependentRowsError, fast_anchor_words

    rng = np.random.default_rng(7)
    mixtures = rng.dirichlet(np.ones(3), 40) @ rng.dirichlet(np.ones(50), 3)
    faint = mixtures + rng.normal(0, 1e-9, mixtures.shape)
    with pytest.raises(DependentRowsError):
        fast_anchor_words(faint, 4, resolution=1e-5)
    assert len(set(fast_anchor_words(faint, 4).tolist())) == 4
    assert len(set(fast_anchor_words(mixtures + rng.normal(0, 1e-4, mixtures.shape), 4, resolution=1e-5).tolist())) == 4
