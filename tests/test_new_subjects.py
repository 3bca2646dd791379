"""Births and deaths are subjects that start and stop; a topic the model only now tells apart is
"found", one it no longer tells apart "lost" (issue 46; docs/design.md, "Topic identity")."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from streamtopics.config import ModelConfig
from streamtopics.refresh.describe import newer_share, older_share
from streamtopics.refresh.lineage import (CONVERTED, NEW_SUBJECT, RISING_SUBJECT, STOP_EVIDENCE, STOPPED_SUBJECT,
                                          RefreshState)
from streamtopics.refresh.reservoir import Reservoir
from streamtopics.text.vocabulary import Vocabulary


def test_older_share_against_a_plain_reference():
    rng = np.random.default_rng(5)
    mixtures = rng.dirichlet(np.full(4, 0.3), size=80)
    stamps = rng.integers(0, 6, size=80) * 1000
    got = older_share(mixtures, stamps)
    # reference: the documents sorted by stamp (ties in pool order), the oldest eighth against the newer half
    order = sorted(range(80), key=lambda d: (stamps[d], d))
    oldest, newer = order[:10], order[40:]
    for k in range(4):
        before = sum(mixtures[d, k] for d in oldest) / len(oldest)
        lately = sum(mixtures[d, k] for d in newer) / len(newer)
        assert got[k] == pytest.approx(before / lately, rel=1e-12)
    # and the mirror: the newest eighth (ties: the later in pool order first) against the older half
    newest, older = order[::-1][:10], order[::-1][40:]
    mirrored = newer_share(mixtures, stamps)
    for k in range(4):
        lately = sum(mixtures[d, k] for d in newest) / len(newest)
        before = sum(mixtures[d, k] for d in older) / len(older)
        assert mirrored[k] == pytest.approx(lately / before, rel=1e-12)
    assert older_share(mixtures, np.full(80, 7)) is None  # stamps that cannot tell older from newer
    silent = mixtures.copy()
    silent[40:, 0] = 0.0
    assert np.isnan(older_share(silent, np.arange(80))[0])  # no weight lately


@pytest.mark.parametrize("kind", ["recent", "uniform"])
def test_reservoir_stamps_follow_documents_through_merge_drop_and_state(kind):
    reservoir = Reservoir(10, kind)
    for d in range(6):
        if d == 3:
            reservoir.stamp = 300  # the model refreshed after 3 documents
        reservoir.add(np.array([d, 20]), np.array([1.0, 2.0]), key_hash=1000 + d)
    batch, stamps = reservoir.stamped_batch()
    expected = np.where(batch.keys >= 1003, 300, 0)
    np.testing.assert_array_equal(stamps, expected)
    np.testing.assert_array_equal(reservoir.batch().keys, batch.keys)
    reservoir.drop_word(20)
    np.testing.assert_array_equal(reservoir.stamped_batch()[1], expected)
    other = Reservoir(10, kind)
    other.stamp = 5  # the other sub-stream's own count means nothing here
    other.add(np.array([7]), np.array([1.0]), key_hash=999)
    reservoir.stamp = 600
    reservoir.merge(other)  # it reaches this model now
    batch, stamps = reservoir.stamped_batch()
    merged = dict(zip(batch.keys.tolist(), stamps.tolist()))
    assert merged[999] == 600 and merged[1000] == 0 and merged[1005] == 300
    restored = Reservoir(10, kind)
    restored.load_state_dict(reservoir.state_dict())
    np.testing.assert_array_equal(restored.stamped_batch()[1], reservoir.stamped_batch()[1])
    assert restored.stamp == 600
    old = {k: v for k, v in reservoir.state_dict().items() if k not in ("stamps", "stamp")}  # written before stamps
    before_stamps = Reservoir(10, kind)
    before_stamps.load_state_dict(old)
    assert not before_stamps.stamped_batch()[1].any() and before_stamps.stamp == 0


def _recovery(topic_word, anchors, prevalence=None, older_share=None, recent_share=None, recent_expected=None):
    """A refresh's result as :meth:`RefreshState.publish` reads it (40 words): equal shares and
    subjects as old as new unless given (the recent ones unknown unless given)."""
    k = topic_word.shape[1]
    return SimpleNamespace(anchors=np.array(anchors), topic_word=topic_word, coefficients=np.ones((40, k)) / k,
                           prevalence=np.ones(k) / k if prevalence is None else np.array(prevalence),
                           alpha=np.ones(k), background=None, background_share=0.0,
                           older_share=np.ones(k) if older_share is None else np.array(older_share),
                           newer_share=np.ones(k),
                           recent_share=None if recent_share is None else np.array(recent_share, dtype=float),
                           recent_expected=None if recent_expected is None else np.array(recent_expected, dtype=float))


def _columns(*word_ranges, n_words):
    out = np.zeros((n_words, len(word_ranges)))
    for k, words in enumerate(word_ranges):
        out[list(words), k] = 1.0 / len(words)
    return out


@pytest.mark.parametrize(("then", "now", "kind"), [(1.0, 0.95, "found"), (0.1, 0.05, "birth"),
                                                   (0.2, 0.8, "birth"), (0.9, 0.3, "birth"), (None, 1.0, "found"),
                                                   (None, 0.3, "birth"), (1.0, None, "birth")])
def test_a_new_topic_is_born_only_if_its_subject_is_new(then, now, kind):
    """The share of the new topic's weight in the reservoir's oldest documents when it appeared
    (``then``) and when it is announced (``now``): found only when both say the stream held it all
    along; an unknown first share leaves it to the share now, an unknown share now makes a birth
    (as before stamps)."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=0))

    def publish(topic_word, anchors, share):
        k = topic_word.shape[1]
        older = None if share is None else np.array([1.0, 1.0, 1.0, share])
        result = SimpleNamespace(anchors=np.array(anchors), topic_word=topic_word, coefficients=np.ones((40, k)) / k,
                                 prevalence=np.ones(k) / k, alpha=np.ones(k), background=None, background_share=0.0,
                                 older_share=older)
        return state.publish(result, vocabulary, 100)

    old = [range(0, 10), range(10, 20), range(20, 25)]
    publish(_columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25], 1.0)
    newcomer = _columns(*old, range(30, 40), n_words=40)
    appeared = publish(newcomer, [0, 10, 20, 30], then)
    assert appeared.tentative == [appeared.topic_ids[3]]
    announced = publish(newcomer, [0, 10, 20, 30], now)
    events = [(e["type"], e["topic"]) for e in announced.events if e["type"] in ("birth", "found")]
    assert events == [(kind, appeared.topic_ids[3])]
    assert announced.tentative == []  # announced either way: the events add up
    assert NEW_SUBJECT == 0.5


def test_first_seen_share_survives_save_and_load():
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    config = ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=0)
    state = RefreshState(config)

    def result(topic_word, anchors, share):
        return _recovery(topic_word, anchors, older_share=[1.0, 1.0, 1.0, share])

    old = [range(0, 10), range(10, 20), range(20, 25)]
    state.publish(result(_columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25], 1.0), vocabulary, 100)
    newcomer = _columns(*old, range(30, 40), n_words=40)
    state.publish(result(newcomer, [0, 10, 20, 30], 0.1), vocabulary, 200)  # it appears: a new subject then
    arrays, meta = state.state_dict(vocabulary)
    restored = RefreshState(config)
    restored.load_state_dict(arrays, meta, vocabulary)
    snapshot = restored.publish(result(newcomer, [0, 10, 20, 30], 0.9), vocabulary, 300)
    # a birth: the share now says old, but the first one, read back from the checkpoint, said new
    assert [e["type"] for e in snapshot.events if e["type"] in ("birth", "found")] == ["birth"]
    legacy = {k: v for k, v in meta.items() if k != "first_new"}  # a file that kept the first older share
    legacy["first_older"] = [[t, 0.1] for t, _ in meta["first_new"]]
    restored = RefreshState(config)
    restored.load_state_dict(arrays, legacy, vocabulary)
    snapshot = restored.publish(result(newcomer, [0, 10, 20, 30], 0.9), vocabulary, 300)
    assert [e["type"] for e in snapshot.events if e["type"] in ("birth", "found")] == ["birth"]


@pytest.mark.parametrize(("rise_then", "rise_now", "evidence", "kind"),
                         [(1.0, 1.0, 50.0, "found"), (2.0, 1.0, 50.0, "birth"), (1.0, 1.8, 50.0, "birth"),
                          (3.0, 3.0, 5.0, "found")])
def test_a_rising_subject_is_born_though_its_words_are_old(rise_then, rise_now, evidence, kind):
    """A new topic whose words the oldest documents use too (older share 1.0) is still a birth when
    its weight in the documents since the last refresh rose ``RISING_SUBJECT`` times over its
    weight before, when it appeared or when announced, with ``STOP_EVIDENCE`` documents' worth
    of evidence; without that evidence the rise says nothing."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=0))

    def publish(topic_word, anchors, rise):
        return state.publish(_recovery(topic_word, anchors, recent_share=[1.0, 1.0, 1.0, rise],
                                       recent_expected=[50.0, 50.0, 50.0, evidence]), vocabulary, 100)

    old = [range(0, 10), range(10, 20), range(20, 25)]
    publish(_columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25], 1.0)
    newcomer = _columns(*old, range(30, 40), n_words=40)
    appeared = publish(newcomer, [0, 10, 20, 30], rise_then)
    announced = publish(newcomer, [0, 10, 20, 30], rise_now)
    assert [(e["type"], e["topic"]) for e in announced.events if e["type"] in ("birth", "found")] == [
        (kind, appeared.topic_ids[3])]
    assert RISING_SUBJECT == 1.5 and STOP_EVIDENCE == 10.0


@pytest.mark.parametrize(("older", "rise", "converted"), [(1.0, 1.0, False), (1.0, 2.0, True), (0.2, 1.0, True)])
def test_a_topic_that_moved_onto_a_new_subject_is_a_birth_under_a_new_id(older, rise, converted):
    """An announced topic keeps its anchor while its words move wholesale (L1 2, past
    ``CONVERTED``): onto a subject new to the stream (old words of the stream's start, rising) it is
    a new topic, born after its grace, and the old id goes missing and leaves after its own; onto
    a subject the stream held all along it stays a change of the same id."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=1))
    old = [range(0, 10), range(10, 20), range(20, 25)]
    first = state.publish(_recovery(_columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25]), vocabulary, 100)
    moved_onto = _columns(*old, range(30, 40), n_words=40)
    shares = {"older_share": [1.0, 1.0, 1.0, older], "recent_share": [1.0, 1.0, 1.0, rise],
              "recent_expected": [50.0] * 4}
    moved = state.publish(_recovery(moved_onto, [0, 10, 20, 25], **shares), vocabulary, 200)
    announced = state.publish(_recovery(moved_onto, [0, 10, 20, 25], **shares), vocabulary, 300)
    events = [(e["type"], e["topic"]) for snapshot in (moved, announced) for e in snapshot.events]
    was = first.topic_ids[3]
    if converted:
        new = moved.topic_ids[3]
        assert new != was and moved.tentative == [new] and moved.missing == [was]
        # the old id goes after its grace: dead, as any gone topic without the pool that would tell it lost
        assert events == [("birth", new), ("death", was)] and announced.topic_ids == moved.topic_ids
    else:
        assert moved.topic_ids == first.topic_ids and events == [("change", was)]
    assert CONVERTED == 1.0


def test_a_stopped_topic_whose_slot_takes_a_new_subject_leaves_without_a_return_or_second_death():
    """Exact sums hold a stopped topic; when its slot moves onto a new subject the words are a birth
    under a new id, and the stopped id leaves silently: not a return (its slot's rise is the
    newcomer's), not dead twice."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=1))
    old = [range(0, 10), range(10, 20), range(20, 25)]
    before = _columns(*old, range(25, 30), n_words=40)
    first = state.publish(_recovery(before, [0, 10, 20, 25]), vocabulary, 100)
    stopping = {"recent_share": [1.0, 1.0, 1.0, 0.1], "recent_expected": [50.0] * 4}
    stopped = state.publish(_recovery(before, [0, 10, 20, 25], **stopping), vocabulary, 200)
    was = first.topic_ids[3]
    assert [(e["type"], e["topic"]) for e in stopped.events] == [("death", was)] and stopped.stopped == [was]
    rising = {"recent_share": [1.0, 1.0, 1.0, 3.0], "recent_expected": [50.0] * 4}
    moved_onto = _columns(*old, range(30, 40), n_words=40)
    events = []
    for n_docs in (300, 400, 500):
        snapshot = state.publish(_recovery(moved_onto, [0, 10, 20, 25], **rising), vocabulary, n_docs)
        events += [(e["type"], e["topic"]) for e in snapshot.events]
    assert events == [("birth", snapshot.topic_ids[3])] and was not in snapshot.topic_ids + snapshot.stopped


@pytest.mark.parametrize(("moved", "events"), [(0.0, [("return", 3)]), (0.6, [("change", 3)])])
def test_a_stopped_topic_returns_only_while_its_slot_holds_still(moved, events):
    """A stopped topic whose share is back returns; one whose slot moved ``change_threshold`` or more
    meanwhile (towards a starting subject's words, whose rise it took) stays stopped, and dies no
    second time when its slot moves back."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=1))
    old = [range(0, 10), range(10, 20), range(20, 25)]
    before = _columns(*old, range(25, 30), n_words=40)
    state.publish(_recovery(before, [0, 10, 20, 25]), vocabulary, 100)
    shares = lambda share: {"recent_share": [1.0, 1.0, 1.0, share], "recent_expected": [50.0] * 4}
    assert state.publish(_recovery(before, [0, 10, 20, 25], **shares(0.1)), vocabulary, 200).stopped == [3]
    towards = before.copy()
    towards[:, 3] = (1 - moved / 2) * before[:, 3] + moved / 2 * _columns(range(30, 40), n_words=40)[:, 0]
    back = state.publish(_recovery(towards, [0, 10, 20, 25], **shares(1.0)), vocabulary, 300)
    assert [(e["type"], e["topic"]) for e in back.events] == events
    after = state.publish(_recovery(before, [0, 10, 20, 25], **shares(0.1)), vocabulary, 400)
    assert [e["type"] for e in after.events if e["type"] != "change"] == ([] if moved else ["death"])


def test_a_topic_is_not_born_and_stopped_in_one_snapshot():
    """A new subject that came and went between refreshes (its recent share already low when its
    grace ends) is announced born, and stopped only at the next refresh."""
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=1))
    old = [range(0, 10), range(10, 20), range(20, 25)]
    state.publish(_recovery(_columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25]), vocabulary, 100)
    newcomer = _columns(*old, range(30, 40), n_words=40)
    gone = {"older_share": [1.0, 1.0, 1.0, 0.1], "recent_share": [1.0, 1.0, 1.0, 0.1], "recent_expected": [50.0] * 4}
    appeared = state.publish(_recovery(newcomer, [0, 10, 20, 30], **gone), vocabulary, 200)
    new = appeared.topic_ids[3]
    announced = state.publish(_recovery(newcomer, [0, 10, 20, 30], **gone), vocabulary, 300)
    assert [e["type"] for e in announced.events if e["topic"] == new] == ["birth"] and announced.stopped == []
    stopped = state.publish(_recovery(newcomer, [0, 10, 20, 30], **gone), vocabulary, 400)
    assert [e["type"] for e in stopped.events if e["topic"] == new] == ["death"] and stopped.stopped == [new]


@pytest.mark.parametrize(("goes_on", "kind"), [(False, "death"), (True, "lost")])
def test_a_topic_that_goes_dies_only_if_its_subject_stopped(goes_on, kind):
    """Its last column put back beside the topics the pooled documents are inferred over: a topic
    whose subject left the newest documents is dead, one whose subject goes on (the model merged or
    split it) is lost; without the pool's stamps, a death as before."""
    from streamtopics.text.documents import DocumentBatch

    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=0, death_grace=0))

    old = [range(0, 10), range(10, 20), range(20, 25), range(25, 30)]
    first = state.publish(_recovery(_columns(*old, n_words=40), [0, 10, 20, 25]), vocabulary, 100)
    going = first.topic_ids[3]
    # 80 documents in stamp order, each on one subject's words; the fourth subject's stop at the middle
    subjects = [k % 4 if goes_on or k < 40 or k % 4 != 3 else k % 3 for k in range(80)]
    words = [list(old[k])[:4] for k in subjects]
    pool = DocumentBatch.from_lists([np.array(w) for w in words], [np.ones(4) for _ in words], np.zeros(80, np.uint64))
    three = _columns(*old[:3], n_words=40)
    gone = state.publish(_recovery(three, [0, 10, 20]), vocabulary, 200, pool=(pool, np.arange(80)))
    assert [(e["type"], e["topic"]) for e in gone.events if e["type"] in ("death", "lost")] == [(kind, going)]
    assert STOPPED_SUBJECT == 0.5
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=0, death_grace=0))
    state.publish(_recovery(_columns(*old, n_words=40), [0, 10, 20, 25]), vocabulary, 100)
    unknown = state.publish(_recovery(three, [0, 10, 20]), vocabulary, 200)  # no pool
    assert [e["type"] for e in unknown.events if e["type"] in ("death", "lost")] == ["death"]


@pytest.mark.parametrize(("faded_share", "subject_in_pool", "half_life", "kind"),
                         [(True, False, 1000, "death"), (True, True, 1000, "lost"), (False, False, 1000, "lost"),
                          (True, False, None, "lost")])
def test_a_topic_that_faded_away_is_dead_even_when_no_pooled_document_holds_it(faded_share, subject_in_pool,
                                                                               half_life, kind):
    """A forgetting model pools only its recent past: once a stopped subject is gone from all of
    the pooled documents, old and new, the newer-share test reads noise (about 1) and would call the topic
    lost. A topic that faded before it went (its last share below FADED_SHARE of its peak) and whose
    last column, added back, takes little of the newest documents (FADED_USE of that peak) is dead;
    one whose subject the documents still use, or that went at full strength, is lost. Exact sums
    pool the whole stream, where the newer-share test tells: there fading alone makes no death. The
    peak shares are read back from a checkpoint taken in between."""
    from streamtopics.refresh.lineage import FADED_SHARE, FADED_USE
    from streamtopics.text.documents import DocumentBatch

    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=0, death_grace=0, half_life=half_life))

    old = [range(0, 10), range(10, 20), range(20, 25), range(25, 30)]
    four = _columns(*old, n_words=40)
    going = state.publish(_recovery(four, [0, 10, 20, 25], [0.25] * 4), vocabulary, 100).topic_ids[3]
    last = 0.25 * FADED_SHARE / 2 if faded_share else 0.25
    state.publish(_recovery(four, [0, 10, 20, 25], [0.25, 0.25, 0.25, last]), vocabulary, 150)
    arrays, meta = state.state_dict(vocabulary)  # the peak shares travel with the checkpoint
    state = RefreshState(state.config)
    state.load_state_dict(arrays, meta, vocabulary)
    # 80 documents in stamp order; the fourth subject, when in the pool, evenly through it
    subjects = [k % 4 if subject_in_pool else k % 3 for k in range(80)]
    words = [list(old[k])[:4] for k in subjects]
    pool = DocumentBatch.from_lists([np.array(w) for w in words], [np.ones(4) for _ in words], np.zeros(80, np.uint64))
    gone = state.publish(_recovery(_columns(*old[:3], n_words=40), [0, 10, 20], [1 / 3] * 3), vocabulary, 200,
                         pool=(pool, np.arange(80)))
    assert [(e["type"], e["topic"]) for e in gone.events if e["type"] in ("death", "lost")] == [(kind, going)]
    assert (FADED_SHARE, FADED_USE) == (0.5, 0.25)
