"""The project's real Kafka broker: topics, produce/consume round trip, restart mid-stream."""

import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(broker, name, partitions):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        deadline = time.monotonic() + 30  # the broker's metadata catches up with the creation
        while name not in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert name in admin.list_topics()
        (meta,) = admin.describe_topics([name])
        assert len(meta["partitions"]) == partitions
    finally:
        admin.close()


def _producer(broker):
    return KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")


def _consumer(broker, topic, group):
    return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=True)


def _send(producer, topic, items):
    return [producer.send(topic, key=k.encode(), value=v.encode()) for k, v in items.items()]


def _as_dict(records):
    return {r.key.decode(): r.value.decode() for r in records}


def _drain(consumer, expected, timeout_s=60):
    """Poll until `expected` records arrived (or timeout); return them as a list."""
    import time

    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got.extend(records)
    # a short extra poll: nothing beyond what was produced may show up
    for records in consumer.poll(timeout_ms=500).values():
        got.extend(records)
    return got


def test_bootstrap_address(kafka_broker):
    host, port = kafka_broker.bootstrap_servers.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert kafka_broker.running


def test_produce_consume_roundtrip(kafka_broker):
    topic = _topic("roundtrip")
    _create_topic(kafka_broker, topic, partitions=3)

    sent = {f"doc-{i}": f"payload {i} " + "x" * (i % 17) for i in range(100)}
    producer = _producer(kafka_broker)
    try:
        futures = _send(producer, topic, sent)
        producer.flush(timeout=60)
        partitions = {f.get(timeout=30).partition for f in futures}
    finally:
        producer.close()
    assert partitions == {0, 1, 2}  # keys spread over all three partitions

    consumer = _consumer(kafka_broker, topic, group=_topic("g"))
    try:
        got = _drain(consumer, expected=len(sent))
    finally:
        consumer.close()
    assert len(got) == len(sent)
    assert _as_dict(got) == sent
    assert {r.partition for r in got} == {0, 1, 2}
    # per partition, offsets are contiguous from 0: nothing duplicated, nothing missing
    for p in range(3):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets)))


def test_restart_loses_nothing(kafka_broker):
    topic = _topic("restart")
    _create_topic(kafka_broker, topic, partitions=3)
    address = kafka_broker.bootstrap_servers

    producer = _producer(kafka_broker)
    consumer = _consumer(kafka_broker, topic, group=_topic("g"))
    try:
        first = {f"a-{i}": f"before {i}" for i in range(50)}
        _send(producer, topic, first)
        producer.flush(timeout=60)
        got_before = _drain(consumer, expected=len(first))
        assert _as_dict(got_before) == first
        consumer.commit()

        kafka_broker.restart()
        assert kafka_broker.bootstrap_servers == address  # same port, same data

        # the same client objects carry on against the restarted broker
        second = {f"b-{i}": f"after {i}" for i in range(50)}
        futures = _send(producer, topic, second)
        producer.flush(timeout=120)
        for f in futures:
            f.get(timeout=60)
        got_after = _drain(consumer, expected=len(second), timeout_s=120)
        assert _as_dict(got_after) == second
    finally:
        producer.close()
        consumer.close()

    # a fresh group reads the whole topic: everything from before and after the restart
    fresh = _consumer(kafka_broker, topic, group=_topic("g"))
    try:
        everything = _drain(fresh, expected=100)
    finally:
        fresh.close()
    assert _as_dict(everything) == {**first, **second}
    assert len(everything) == 100
