"""``bench``: a quick ingest benchmark (read, tokenize, learn from text and from counts, refresh)."""

from __future__ import annotations

import time

import click

from ..records import Record
from ..sources import open_source
from .console import BadInput
from .options import Command, model_options, source_kwargs, source_options


@click.command(cls=Command)
@click.argument("source", default="builtin")
@source_options
@click.option("--documents", type=click.IntRange(min=10), default=4000, show_default=True,
              help="Documents read from SOURCE.")
@model_options
def bench(source, format_, vocabulary_file, text_fields, id_field, time_field, time_format, from_offset,
          from_time, documents, n_topics, vocabulary_size, warmup_documents, seed):
    """Quick ingest benchmark: read, tokenize, learn from text, learn from counts, refresh.

    SOURCE defaults to the built-in stream. Prints documents per second for each stage.
    """
    from streamtopics import StreamingTopicModel

    from .. import builtin_corpus

    opened = open_source(source, **source_kwargs(format_, vocabulary_file, text_fields, id_field, time_field,
                                                  time_format, from_offset, from_time))
    timings = []
    t0 = time.perf_counter()
    docs = []
    for item in opened:
        if isinstance(item, Record):
            docs.append(item.document)
            if len(docs) >= documents:
                break
    timings.append(("read the archive", time.perf_counter() - t0))
    if not docs:
        raise BadInput(f"{opened.name}: no document found")
    tokenizer = builtin_corpus.tokenizer() if opened.spec.get("format") == "builtin" else None
    vocabulary_model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size,
                                           warmup_documents=min(warmup_documents, len(docs)), tokenizer=tokenizer)
    vocabulary_model.learn_many(docs[: vocabulary_model.warmup_documents])
    vocabulary_model.statistics()  # builds the vocabulary and compiles (or loads) the kernels
    vocabulary = vocabulary_model.vocabulary
    raw_model = StreamingTopicModel(n_topics, vocabulary, tokenizer=tokenizer, seed=seed)
    if all(isinstance(t, str) for t in docs):
        t0 = time.perf_counter()
        for text in docs:
            raw_model.tokenizer.count(text)
        timings.append(("tokenize", time.perf_counter() - t0))
    t0 = time.perf_counter()
    raw_model.learn_many(docs)
    raw_model.statistics()
    timings.append(("learn from raw documents (tokenize + encode + ingest)", time.perf_counter() - t0))
    batch, _ = raw_model.encode_many(docs)
    counts_model = StreamingTopicModel(n_topics, vocabulary, tokenizer=tokenizer, seed=seed)
    t0 = time.perf_counter()
    counts_model.learn_many(batch)
    counts_model.statistics()
    timings.append(("learn from pre-indexed counts (ingest only)", time.perf_counter() - t0))
    t0 = time.perf_counter()
    raw_model.refresh()
    refresh_s = time.perf_counter() - t0
    click.echo(f"{len(docs):,} documents from {opened.name}, vocabulary {len(vocabulary):,} words, "
               f"{n_topics} topics")
    click.echo(f"{'stage':<56} {'seconds':>8} {'docs/s':>10}")
    for stage, seconds in timings:
        click.echo(f"{stage:<56} {seconds:>8.3f} {len(docs) / seconds:>10,.0f}")
    click.echo(f"{'refresh (anchors + recovery + alignment)':<56} {refresh_s:>8.3f} {'':>10}")
