"""Shared pytest fixtures."""

import sys
from pathlib import Path

import pytest

from devtools.kafka_broker import BrokerError, KafkaBroker

sys.path.insert(0, str(Path(__file__).parent))  # kafka_helpers beside this file (importlib mode)
from kafka_helpers import KAFKA_CORPUS_DOCS, build_vocabulary, load_corpus, reference_model  # noqa: E402


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
