"""AnchorTopics as a river citizen: river's own estimator checks, behaviour, and the example.

river's checks (``river.checks.yield_checks``, the same list river runs on its own estimators in
0.26) are run twice: as river runs them, on the stream river picks for a plain transformer
(``datasets.TrumpApproval``: six numeric features, read by a topic model as six "words" with
real-valued counts), and with every dataset-driven check re-pointed at a bag-of-words text stream,
the input a topic model is for. None is skipped: ``AnchorTopics._unit_test_skips()`` is empty and
``test_no_check_is_skipped`` keeps it so. Checks that pass but prove little for a topic model say
so below (``VACUOUS_OR_NARROW``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.util
import io
import json
import pickle
import random
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import river
from river import checks, compose, datasets, feature_extraction, preprocessing

from streamtopics.integrations.river import AnchorTopics, _infer_one
from streamtopics.text.tokenizer import english_stop_words

REPO = Path(__file__).resolve().parents[1]

# The mini-batch checks (learn_many vs learn_one, transform_many vs transform_one) are only
# yielded by river when pandas is importable; they are required here, not optional.
MINI_BATCH_CHECKS = {"check_learn_many_matches_learn_one", "check_transform_many_matches_transform_one"}

# Checks that pass for AnchorTopics but test little of a topic model, and why.
VACUOUS_OR_NARROW = {
    "check_predict_one_before_any_learn":
        "transform_one before any learning returns {} (no topics exist yet): it only shows it "
        "does not raise; the output is tested in test_no_topics_before_first_refresh",
    "check_predict_one_pure":
        "checks that transform_one leaves its input unchanged, not the model: model purity "
        "(which river's LDA lacks) is tested in test_transform_does_not_change_the_model",
    "check_pickling":
        "checks only that unpickling gives an AnchorTopics; test_pickle_roundtrip_keeps_state "
        "checks that the state and the outputs survive",
}

TOPIC_WORDS = {
    "fruit": ["apple", "pear", "plum", "cherry", "grape", "melon", "peach", "lemon"],
    "sport": ["goal", "match", "team", "referee", "league", "coach", "score", "win"],
    "space": ["orbit", "rocket", "planet", "launch", "moon", "comet", "nasa", "star"],
}


def text_stream(n: int, seed: int = 0, topics=("fruit", "sport", "space")):
    """``({word: count}, topic)`` documents: 10-16 tokens, mostly from one topic, some from a
    second. Deterministic in ``seed``."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        main = topics[i % len(topics)]
        other = rng.choice([t for t in topics if t != main])
        tokens = [rng.choice(TOPIC_WORDS[main] if rng.random() < 0.85 else TOPIC_WORDS[other])
                  for _ in range(rng.randint(10, 16))]
        docs.append((dict(Counter(tokens)), main))
    return docs


def unit_params():
    return next(AnchorTopics._unit_test_params())


@contextlib.contextmanager
def _sklearn_importable():
    """river's check generator does ``from sklearn import datasets`` on its first line, but only
    uses it to build multi-target regression streams, never for a transformer; scikit-learn is
    not a dependency of streamtopics, so a placeholder stands in while the list is built (a
    no-op when scikit-learn is installed)."""
    if importlib.util.find_spec("sklearn") is not None:
        yield
        return
    fake = types.ModuleType("sklearn")
    fake.datasets = types.ModuleType("sklearn.datasets")
    sys.modules.update({"sklearn": fake, "sklearn.datasets": fake.datasets})
    try:
        yield
    finally:
        del sys.modules["sklearn"], sys.modules["sklearn.datasets"]


def river_checks():
    model = AnchorTopics(**unit_params())
    with _sklearn_importable():
        return list(checks.yield_checks(model))


RIVER_CHECKS = river_checks()
TEXT = text_stream(200, seed=1, topics=("fruit", "sport"))


VOCABULARY = sorted({w for x, _ in TEXT for w in x})


def _on_text(check):
    """The same river check, with its dataset replaced by the bag-of-words stream.

    check_learn_many_matches_learn_one builds its frames from the first row's keys and reads
    those keys in every row, i.e. it assumes a fixed schema; a sparse bag of words (absent word =
    absent key) has none, so that check gets the dense equivalent: every vocabulary word in every
    row, 0 for absent words (a zero count means "absent" to AnchorTopics).
    """
    if "dataset" not in getattr(check, "keywords", {}):
        return None
    dataset = copy.deepcopy(TEXT)
    if check.__name__ == "check_learn_many_matches_learn_one":
        dataset = [({w: x.get(w, 0) for w in VOCABULARY}, y) for x, y in dataset]
    return functools.partial(check.func, dataset=dataset)


# ---------------------------------------------------------------------- river's checks
def test_check_list_is_complete():
    names = {c.__name__ for c in RIVER_CHECKS}
    missing = MINI_BATCH_CHECKS - names
    assert not missing, (f"river did not yield {sorted(missing)}: install pandas "
                         f"(river[pandas]), which river's mini-batch interface needs")
    for expected in ("check_learn_one", "check_pickling", "check_emerging_features",
                     "check_disappearing_features", "check_radically_disappearing_features",
                     "check_shuffle_features_no_impact", "check_predict_one_pure",
                     "check_transform_one", "check_no_state_aliasing_with_input",
                     "check_clone_is_independent", "check_bounded_memory_growth"):
        assert expected in names
    assert len(RIVER_CHECKS) >= 25


def test_no_check_is_skipped():
    assert AnchorTopics(**unit_params())._unit_test_skips() == set()


@pytest.mark.parametrize("check", RIVER_CHECKS, ids=[c.__name__ for c in RIVER_CHECKS])
def test_river_check(check):
    check(AnchorTopics(**unit_params()))


TEXT_CHECKS = [c for c in RIVER_CHECKS if _on_text(c) is not None]


@pytest.mark.parametrize("check", TEXT_CHECKS, ids=[c.__name__ for c in TEXT_CHECKS])
def test_river_check_on_text(check):
    _on_text(check)(AnchorTopics(**unit_params()))


def test_checks_exercise_real_topics():
    """The check streams are long enough for the test parameters to produce topics, so the
    checks compare real mixtures, not the empty pre-refresh output."""
    for stream in (list(datasets.TrumpApproval().take(200)), TEXT):
        model = AnchorTopics(**unit_params())
        for x, _ in stream[:60]:
            model.learn_one(x)
        assert model.snapshot is not None and model.snapshot.version >= 5
        assert model.refresh_failures == 0
        out = model.transform_one(stream[0][0])
        assert len(out) == 2 and abs(sum(out.values()) - 1) < 1e-9


# ---------------------------------------------------------------------- behaviour
def fitted(n=600, **params):
    model = AnchorTopics(**{"n_topics": 3, "warmup_documents": 60, "refresh_every": 200,
                            "anchor_min_df": 5, **params})
    for x, _ in text_stream(n):
        model.learn_one(x)
    return model


def test_no_topics_before_first_refresh():
    pd = pytest.importorskip("pandas")
    model = AnchorTopics(n_topics=3, warmup_documents=60, refresh_every=200, anchor_min_df=5)
    stream = text_stream(200)
    for i, (x, _) in enumerate(stream[:199]):
        model.learn_one(x)
        assert model.transform_one(x) == {}
        # the warm-up documents are absorbed at once when the vocabulary is built
        assert model.documents_absorbed == (0 if i < 59 else i + 1)
    assert model.top_words() == {} and model.snapshot is None
    frame = model.transform_many(pd.DataFrame([x for x, _ in stream[:3]], index=[7, 8, 9]))
    assert list(frame.index) == [7, 8, 9] and frame.shape == (3, 0)
    model.learn_one(stream[199][0])  # the 200th absorbed document: the first refresh
    assert model.snapshot.version == 1
    out = model.transform_one(stream[0][0])
    assert sorted(out) == [f"topic_{t}" for t in sorted(model.snapshot.topic_ids)]
    assert all(v >= 0 for v in out.values()) and sum(out.values()) == pytest.approx(1)


def test_recovers_planted_topics_with_stable_ids():
    model = fitted(600)
    assert model.snapshot.version == 3  # refreshes at 200, 400 and 600 absorbed documents
    groups = {frozenset(w for w, _ in words[:6]) for words in model.top_words(6).values()}
    for topic in TOPIC_WORDS.values():
        assert any(len(group & set(topic)) >= 5 for group in groups), groups
    names = sorted(model.transform_one({"apple": 2}))
    for x, _ in text_stream(400, seed=5):
        model.learn_one(x)
    assert model.snapshot.version == 5
    assert sorted(model.transform_one({"apple": 2})) == names  # same topics, same ids
    fruit = max(model.transform_one({"apple": 3, "pear": 2, "plum": 1}).items(), key=lambda kv: kv[1])
    assert "apple" in [w for w, _ in model.top_words(8)[fruit[0]]]


def test_counts_matter():
    model = fitted()
    a = model.transform_one({"apple": 5, "goal": 1})
    b = model.transform_one({"apple": 1, "goal": 5})
    fruit = max(a, key=a.get)
    assert fruit == max(model.transform_one({"apple": 1}).items(), key=lambda kv: kv[1])[0]
    assert a[fruit] > 0.6 > b[fruit]


def test_unused_topics_weigh_exactly_zero():
    """The inference only drives an unused topic's weight towards 0 (below 1e-15 here); under its
    tolerance the weight is 0, the key stays, and the mixture still sums to 1 (issue 48 item 9)."""
    pd = pytest.importorskip("pandas")
    model = fitted()
    docs = [x for x, _ in text_stream(30, seed=7)]
    raw = model.model.infer(docs)
    assert ((raw > 0) & (raw < 1e-15)).any()  # what transform_one returned before
    mixtures = [model.transform_one(x) for x in docs]
    names = [f"topic_{t}" for t in sorted(model.snapshot.topic_ids)]
    weights = np.array([[m[name] for name in names] for m in mixtures])
    assert all(sorted(m) == names for m in mixtures)
    assert ((weights == 0) | (weights >= 1e-6)).all() and (weights == 0).sum() >= 30
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    order = np.argsort(model.snapshot.topic_ids)
    np.testing.assert_allclose(weights, raw[:, order], rtol=0, atol=3 * 1e-6)  # the rest barely moves
    frame = model.transform_many(pd.DataFrame(docs).fillna(0))
    np.testing.assert_allclose(frame[names].to_numpy(), weights, rtol=0, atol=1e-12)


def test_transform_does_not_change_the_model():
    pd = pytest.importorskip("pandas")
    model = fitted()
    before = pickle.dumps(model)
    docs = [x for x, _ in text_stream(20, seed=9)]
    for x in docs:
        model.transform_one(x)
    model.transform_many(pd.DataFrame(docs).fillna(0))
    model.transform_many(docs)
    assert pickle.dumps(model) == before
    # river's own LDA, for contrast: transform_one draws from its sampler and grows its vocabulary.
    lda = preprocessing.LDA(n_components=3, seed=0)
    for x in docs:
        lda.learn_one(x)
    before = pickle.dumps(lda)
    lda.transform_one({"never": 1, "seen": 1})
    assert pickle.dumps(lda) != before


def test_learn_many_on_bag_of_words_frames_matches_learn_one():
    pd = pytest.importorskip("pandas")
    rng = random.Random(3)
    texts = [" ".join(w for w, c in x.items() for _ in range(c)) for x, _ in text_stream(450)]
    rng.shuffle(texts)
    bow = feature_extraction.BagOfWords()
    params = {"n_topics": 3, "warmup_documents": 50, "refresh_every": 100, "anchor_min_df": 5}
    one, many, listed = AnchorTopics(**params), AnchorTopics(**params), AnchorTopics(**params)
    for text in texts:
        one.learn_one(bow.transform_one(text))
    for start in range(0, len(texts), 64):  # batches straddle the warm-up and refresh points
        frame = bow.transform_many(pd.Series(texts[start:start + 64]))
        assert all(str(dtype).startswith("Sparse") for dtype in frame.dtypes)
        many.learn_many(frame)
        listed.learn_many([bow.transform_one(t) for t in texts[start:start + 64]])
    for other in (many, listed):
        assert other.documents_absorbed == one.documents_absorbed == 450
        assert other.snapshot.version == one.snapshot.version == 4
        np.testing.assert_array_equal(other.snapshot.topic_word, one.snapshot.topic_word)
    queries = bow.transform_many(pd.Series(texts[:30]))
    expected = pd.DataFrame([one.transform_one(bow.transform_one(t)) for t in texts[:30]])
    pd.testing.assert_frame_equal(many.transform_many(queries), expected)
    # A dense frame with missing values (NaN = absent word) reads the same as the sparse one.
    dense = queries.sparse.to_dense().astype(float).replace(0.0, np.nan)
    pd.testing.assert_frame_equal(one.transform_many(dense), expected)


def test_mini_batch_pipeline():
    pd = pytest.importorskip("pandas")
    texts = [" ".join(w for w, c in x.items() for _ in range(c)) for x, _ in text_stream(300)]
    params = {"n_topics": 3, "warmup_documents": 50, "refresh_every": 100, "anchor_min_df": 5}
    batched = compose.Pipeline(feature_extraction.BagOfWords(), AnchorTopics(**params))
    for start in range(0, 300, 100):
        batched.learn_many(pd.Series(texts[start:start + 100]))
    streamed = compose.Pipeline(feature_extraction.BagOfWords(), AnchorTopics(**params))
    for text in texts:
        streamed.learn_one(text)
    out = batched.transform_many(pd.Series(texts[:5], index=list("abcde")))
    assert list(out.index) == list("abcde") and list(out.columns) == ["topic_0", "topic_1", "topic_2"]
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    for label, text in zip("abcde", texts[:5]):
        assert out.loc[label].to_dict() == pytest.approx(streamed.transform_one(text), abs=1e-12)


def test_refresh_schedule_and_postponed_refresh():
    # No word is in 12 of the first 20 documents, so the first scheduled refresh finds no
    # candidate anchor: it is postponed, not raised, and the next one (at 40) succeeds.
    model = AnchorTopics(n_topics=3, warmup_documents=10, refresh_every=20, anchor_min_df=12)
    stream = text_stream(120)
    assert max(Counter(w for x, _ in stream[:20] for w in x).values()) < 12
    for x, _ in stream[:39]:
        model.learn_one(x)
    assert model.refresh_failures == 1 and "candidate anchors" in model.last_refresh_error
    assert model.snapshot is None and model.transform_one(stream[0][0]) == {}
    model.learn_one(stream[39][0])
    assert model.snapshot.version == 1 and model.snapshot.documents_seen == 40
    for x, _ in stream[40:120]:
        model.learn_one(x)
    assert [model.snapshot.version, model.snapshot.documents_seen] == [5, 120]
    manual = AnchorTopics(n_topics=3, warmup_documents=10, refresh_every=None, anchor_min_df=5)
    for x, _ in stream:
        manual.learn_one(x)
    assert manual.snapshot is None
    assert manual.refresh().version == 1 and manual.transform_one(stream[0][0])


def test_pickle_roundtrip_keeps_state():
    model = fitted(500)
    copy_ = pickle.loads(pickle.dumps(model))
    probe = {"apple": 2, "goal": 1, "moon": 1}
    assert copy_.transform_one(probe) == model.transform_one(probe)
    for x, _ in text_stream(300, seed=4):
        model.learn_one(x)
        copy_.learn_one(x)
    assert copy_.snapshot.version == model.snapshot.version == 4
    assert copy_.transform_one(probe) == model.transform_one(probe)


def test_topic_word_distributions():
    model = fitted()
    with pytest.raises(KeyError):
        AnchorTopics().topic_word(0)
    for name, top in model.top_words(3).items():
        dist = model.topic_word(name)
        assert dist == model.topic_word(int(name.split("_")[1]))
        assert sum(dist.values()) == pytest.approx(1)
        assert list(dist)[:3] == [w for w, _ in top]
        assert set(dist) <= set(model.snapshot.vocabulary)


def test_ngram_keys_and_raw_text():
    model = AnchorTopics(n_topics=2, warmup_documents=20, refresh_every=40, anchor_min_df=3)
    bow = feature_extraction.BagOfWords(ngram_range=(1, 2))
    texts = [" ".join(w for w, c in x.items() for _ in range(c)) for x, _ in text_stream(80, topics=("fruit", "sport"))]
    for text in texts:
        model.learn_one(bow.transform_one(text))
    assert model.rejections["non_string_token"] == 0
    assert any(" " in w for w in model.snapshot.vocabulary)  # bigrams became words
    assert model.transform_one("apple pear plum") == model.transform_one({"apple": 1, "pear": 1, "plum": 1})


def test_single_document_kernel_matches_engine():
    model = fitted()
    for x, _ in text_stream(50, seed=11):
        np.testing.assert_allclose(_infer_one(model.model, x), model.model.infer([x])[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(_infer_one(model.model, {"unknown": 3}), model.snapshot.prevalence / model.snapshot.prevalence.sum())


def test_in_a_classification_pipeline():
    from river import linear_model, metrics

    pipeline = compose.Pipeline(
        AnchorTopics(n_topics=3, warmup_documents=60, refresh_every=100, anchor_min_df=5),
        linear_model.SoftmaxRegression(),
    )
    metric = metrics.Accuracy()
    for i, (x, y) in enumerate(text_stream(900, seed=2)):
        y_pred = pipeline.predict_one(x)
        if i >= 300:
            metric.update(y, y_pred)
        pipeline.learn_one(x, y)
    assert metric.get() > 0.8  # three topics, one per label: topic features separate them


def test_module_name_does_not_shadow_river():
    import streamtopics.integrations.river as ours

    assert ours.base is river.base and "site-packages" in river.__file__
    code = "import streamtopics.integrations.river, river; print(river.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert "site-packages" in out.stdout
    broken = subprocess.run([sys.executable, "-c", "import streamtopics.integrations.river"], cwd=REPO / "streamtopics" / "integrations",
                            capture_output=True, text=True)
    assert broken.returncode != 0 and "Start Python from another folder" in broken.stderr


def test_the_documented_pipeline_learns_topics_without_stop_words():
    """docs/river-and-sklearn.md's first example: its topics are its two subjects, not "the" (issue 48 item 9)."""
    page = (REPO / "docs" / "river-and-sklearn.md").read_text(encoding="utf-8")
    code = page.split("## river", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "docs/river-and-sklearn.md", "exec"), namespace)
    top = {name: {w for w, _ in words} for name, words in namespace["topics"].top_words(3).items()}
    assert not set().union(*top.values()) & english_stop_words(), top
    sport, law = sorted(top.values(), key=lambda words: "court" in words)
    assert {"appeal", "court"} <= law and {"team", "match"} <= sport, top


# ---------------------------------------------------------------------- the example
def _example():
    spec = importlib.util.spec_from_file_location("river_pipeline_example", REPO / "examples" / "river_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipeline_example_on_a_slice(tmp_path, capsys):
    example = _example()
    data = example.DEFAULT_DATA_DIR / example.DATASET
    assert data.exists(), f"the example's data is missing: {data}"
    out = tmp_path / "anchor.json"
    results = example.main(["--limit", "300", "--warmup", "100", "--refresh-every", "100",
                            "--models", "anchor", "--progress", "0", "--json", str(out)])
    printed = capsys.readouterr().out
    assert json.loads(out.read_text()) == results
    (anchor,) = results
    assert anchor["documents"] == 300 and anchor["docs_per_s"] > 0
    assert anchor["refreshes"] == 2 and anchor["refresh_failures"] == 0  # at 100 and 200 absorbed
    assert len(anchor["features"]) == 20 and all(f.startswith("topic_") for f in anchor["features"])
    assert len(anchor["top_words"]) == 20
    assert 0.0 <= anchor["accuracy"] <= 1.0 and anchor["accuracy_after_warmup"] is not None
    assert "AnchorTopics(20)" in printed and "docs/s" in printed
    # river's LDA in its place, on a shorter slice of the same stream (it runs ~10 documents/s).
    (lda,) = example.main(["--limit", "30", "--warmup", "10", "--models", "lda", "--progress", "0"])
    assert lda["pipeline"].startswith("BagOfWords | LDA(20)") and lda["documents"] == 30
    assert "LDA(20)" in capsys.readouterr().out
