"""Shared fixtures, and the hooks that group the tests (markers, xdist groups, order) and
compile the library's kernels once per run."""

import itertools
import sys
from pathlib import Path

import pytest

from devtools.kafka_broker import BrokerError, KafkaBroker

sys.path.insert(0, str(Path(__file__).parent))  # kafka_helpers beside this file (importlib mode)
from kafka_helpers import KAFKA_CORPUS_DOCS, build_vocabulary, load_corpus, reference_model  # noqa: E402


def pytest_itemcollected(item):
    """A test that takes the broker is a ``kafka`` test, in whichever module it is. Under xdist
    (``--dist loadgroup``, as scripts/test.sh runs) the kafka tests share one worker, so one
    broker serves the whole run, and every other module runs whole in one worker, so its
    module-scoped fixtures (a replay, a quality suite) are built once. (Marked as each item is
    collected: before ``-m`` deselects and before xdist reads the groups.)"""
    if "kafka_broker" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.kafka)
        item.add_marker(pytest.mark.xdist_group("kafka"))
    else:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


#: The long groups, longest first. They run before the rest, so that under xdist none of them is
#: started last and runs alone at the end (the order of a serial run does not matter).
LONG_FIRST = ("peers", "gpu", "kafka", "browser", "slow")


def pytest_collection_modifyitems(items):
    def rank(item):
        return next((i for i, name in enumerate(LONG_FIRST) if item.get_closest_marker(name)), len(LONG_FIRST))

    items.sort(key=rank)  # stable: a module's tests keep their order


def pytest_sessionstart(session):
    """Compile the library's kernels once, before any test (and before xdist starts its
    workers): numba caches them on disk, and every worker then loads them instead of compiling
    its own copies. Nothing to do once the cache holds them."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller did it
        return
    from consumers.kernel_cache import compile_ahead

    helper = compile_ahead()  # on a first run, the refinement's kernels in a second process
    if helper is None:
        return
    from streamtopics import StreamingTopicModel
    from streamtopics.synthetic import semi_synthetic, separable_topics

    truth = separable_topics(60, 3, anchor_mass=0.05, seed=1)
    counts, _ = semi_synthetic(truth.topic_word, 300, alpha=0.2, doc_length=30, seed=2)
    words = ["".join(letters) for letters in itertools.product("kmprst", "aeiou", "lnx")][:60]  # 3-letter words
    texts = [" ".join(words[j] for j, c in zip(row.indices, row.data) for _ in range(int(c))) for row in counts]
    for statistics in ("exact", "sketch"):
        model = StreamingTopicModel(3, warmup_documents=100, cooccurrence=statistics, anchor_min_df=2)
        model.learn_many(texts)  # text, tokenizer and ingest kernels
        model.refresh()  # anchors, recovery, refinement, alignment, labels
        model.transform_one(texts[0])  # inference
    helper.wait()


@pytest.fixture(scope="session")
def kafka_broker():
    """A real single-node Kafka broker for the whole test session (fails, never skips)."""
    broker = KafkaBroker()
    try:
        broker.start(timeout=180)
    except BrokerError as exc:
        broker.stop()
        pytest.fail(f"could not start the Kafka test broker: {exc}", pytrace=False)
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(scope="session")
def corpus():
    """The Kafka tests' corpus (20 Newsgroups posts)."""
    return load_corpus(KAFKA_CORPUS_DOCS)


@pytest.fixture(scope="session")
def vocabulary(corpus):
    return build_vocabulary(corpus, 2000)


@pytest.fixture(scope="session")
def vocabulary_file(vocabulary, tmp_path_factory):
    path = tmp_path_factory.mktemp("vocabulary") / "vocabulary.txt"
    path.write_text("\n".join(vocabulary.words), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def reference(corpus, vocabulary):
    """StreamingTopicModel fed the corpus in-process: what every consumer must equal."""
    return reference_model(corpus, vocabulary)
