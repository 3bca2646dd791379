"""``infer``: topic mixtures of documents under a saved model, one JSON line each, with the
topics' labels; a document with no known word is flagged, not given the prior."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import reasons
from ..records import Malformed, Record
from ..sources import open_source
from .console import BadInput, Console
from .options import source_kwargs, source_options


def _stdin_records():
    for line, raw in enumerate(sys.stdin.buffer, 1):
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as error:
            yield Malformed(f"<stdin>:{line}", reasons.NOT_UTF8, f"byte {error.start + 1} of the line")
            continue
        if text.strip():
            yield Record(text, line)


@click.command()
@click.argument("input", required=False, default="-")
@click.option("--model", "model_location", required=True, type=click.Path(exists=True, path_type=Path),
              help="A run directory (its checkpointed model) or a model file saved with model.save.")
@source_options
@click.option("--top", type=click.IntRange(min=0), default=3, show_default=True,
              help="Topics per document, largest first (0: all).")
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True)
def infer(input, model_location, format_, vocabulary_file, text_fields, id_field, time_field, time_format,
          from_offset, from_time, top, batch_size):
    """Topic mixtures of documents, one JSON line each:
    {"key": ..., "topics": [[id, weight, label], ...]}, largest weight first.

    A document none of whose words the model knows has nothing to infer from: its line is
    {"key": ..., "topics": [], "no_known_words": true}, and a warning on stderr counts them.

    INPUT is `-` (stdin, one document per line; the key is the line number) or any archive that
    `replay` reads (the key is the record's id).
    """
    from streamtopics import StreamingTopicModel

    from ..kernel_cache import COMPILING_MESSAGE, first_compile
    from ..replay import model_path

    model = StreamingTopicModel.load(model_path(model_location))
    if model.snapshot is None:
        raise BadInput(f"{model_location}: the model has no topics yet (it was never refreshed)")
    console = Console()
    if first_compile():
        click.echo(COMPILING_MESSAGE, err=True)  # stdout is the JSON lines
    kwargs = source_kwargs(format_, vocabulary_file, text_fields, id_field, time_field, time_format, from_offset,
                           from_time)
    records = _stdin_records() if input == "-" else open_source(input, **kwargs)
    snapshot = model.snapshot
    batch: list[Record] = []
    unknown = 0

    def flush():
        nonlocal unknown
        mixtures, known = model.infer([r.document for r in batch], return_known=True)
        for record, row, tokens in zip(batch, mixtures.tolist(), known.tolist()):
            if tokens == 0:
                unknown += 1
                click.echo(json.dumps({"key": record.key, "topics": [], "no_known_words": True}))
                continue
            ranked = sorted(zip(snapshot.topic_ids, row, snapshot.labels), key=lambda entry: -entry[1])
            ranked = ranked[:top] if top else ranked
            click.echo(json.dumps({"key": record.key, "topics": [[t, round(w, 4), label] for t, w, label in ranked]}))
        batch.clear()

    for item in records:
        if isinstance(item, Malformed):
            console.malformed(item)
            continue
        batch.append(item)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if unknown:
        console.echo(f"warning: {unknown:,} document{'s' if unknown != 1 else ''} had no word the model knows: "
                     'nothing to infer from (flagged "no_known_words")', err=True)
