"""``produce``: push an archive into a Kafka topic, one message per document."""

from __future__ import annotations

import json

import click

from ..records import Malformed
from ..sources import open_source, parse_kafka_url
from .console import BadInput, Console
from .options import source_kwargs, source_options


@click.command()
@click.argument("source")
@click.argument("destination", metavar="kafka://HOST:PORT/TOPIC")
@source_options
@click.option("--json", "as_json", is_flag=True,
              help='Send {"id", "text", "timestamp"} JSON objects instead of the bare text.')
@click.option("--limit", type=click.IntRange(min=1), help="Send at most this many documents.")
def produce(source, destination, format_, vocabulary_file, text_fields, id_field, time_field, time_format,
            from_offset, from_time, as_json, limit):
    """Push an archive into a Kafka topic, one message per document (for demos and tests).

    The message key is the document's id, the message timestamp its time (when it has one).
    """
    from kafka import KafkaProducer

    servers, topic = parse_kafka_url(destination)
    opened = open_source(source, **source_kwargs(format_, vocabulary_file, text_fields, id_field, time_field,
                                                  time_format, from_offset, from_time))
    try:
        producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=20)
    except Exception as error:
        raise BadInput(f"cannot reach Kafka at {servers}: {error}") from None
    console = Console()
    sent = 0
    try:
        with console.progress(opened, "produce") as update:
            for item in opened:
                if isinstance(item, Malformed):
                    console.malformed(item)
                    continue
                if not isinstance(item.document, str):
                    raise BadInput(f"{opened.name}: holds word counts, not text; produce sends text")
                if as_json:
                    value = json.dumps({"id": item.key, "text": item.document, "timestamp": item.timestamp})
                else:
                    value = item.document
                producer.send(topic, value=value.encode("utf-8"),
                              key=None if item.key is None else str(item.key).encode("utf-8"),
                              timestamp_ms=None if item.timestamp is None else int(item.timestamp * 1000))
                sent += 1
                if sent % 256 == 0:
                    update(sent)
                if limit and sent >= limit:
                    break
            producer.flush()
    finally:
        producer.close()
    click.echo(f"produced {sent:,} messages to {topic} on {servers} ({console.malformed_shown:,} malformed skipped)")
