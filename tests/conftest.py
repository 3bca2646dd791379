"""Shared pytest fixtures."""

import pytest

from consumers.broker import BrokerError, KafkaBroker


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
