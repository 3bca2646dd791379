"""ModelConfig is the one home of the model's settings: everything else takes its defaults."""

from __future__ import annotations

import dataclasses
import inspect
import re

import click
import pytest

from consumers.cli import options as cli_options
from consumers.consumer_config import ConsumerConfig
from streamtopics import StreamingTopicModel
from streamtopics.config import ModelConfig, default, doc
from streamtopics.integrations.river import AnchorTopics


def test_every_setting_has_a_default_and_a_doc():
    for setting in dataclasses.fields(ModelConfig):
        assert setting.default is not dataclasses.MISSING, setting.name
        assert doc(setting.name).strip(), setting.name


def test_the_anchor_methods_the_settings_name_are_the_selectors_there_are():
    from streamtopics.config import ANCHOR_METHODS
    from streamtopics.refresh.anchor_selection import ANCHOR_SELECTORS

    assert ANCHOR_METHODS == tuple(ANCHOR_SELECTORS)


def test_get_config_is_the_config_and_rebuilds_the_model():
    model = StreamingTopicModel(3, half_life=800, max_df=0.5)
    config = model.get_config()
    assert config == dataclasses.asdict(model.config)
    assert set(config) == {f.name for f in dataclasses.fields(ModelConfig)}
    assert config["activity_half_life"] == 100.0  # normalised: half_life / 8
    assert StreamingTopicModel(**config).get_config() == config
    assert model.n_topics == 3 and model.max_df == 0.5 and model.vocabulary_size == default("vocabulary_size")


def test_consumer_config_takes_the_model_defaults():
    consumer = ConsumerConfig(topics=["news"])
    consumer_fields = {f.name: f for f in dataclasses.fields(ConsumerConfig)}
    for name in ("n_topics", "vocabulary_size", "warmup_documents", "anchor_min_df", "seed"):
        assert getattr(consumer, name) == default(name), name
        assert consumer_fields[name].metadata["help"] == doc(name)


def test_cli_model_options_take_the_model_defaults():
    command = cli_options.model_options(click.command()(lambda **_: None))
    defaults = {p.name: p.default for p in command.params}
    assert defaults == {"n_topics": default("n_topics"), "vocabulary_size": default("vocabulary_size"),
                        "warmup_documents": default("warmup_documents"), "seed": default("seed")}
    assert defaults["vocabulary_size"] == 10_000


def test_anchor_topics_takes_the_model_defaults():
    for name, parameter in inspect.signature(AnchorTopics).parameters.items():
        if name in ModelConfig.__dataclass_fields__ and name != "refresh_every":  # river refreshes itself
            assert parameter.default == default(name), name


@pytest.mark.parametrize("settings, message", [
    ({"n_topics": 0}, "n_topics must be at least 1"),
    ({"anchor_method": "random"}, "unknown anchor_method 'random'"),
    ({"half_life": 100, "window": 500}, "a sliding window excludes half_life"),
    ({"max_df": 1.5}, "max_df is a fraction of the documents"),
    ({"max_df": 0.5, "background_topic": False}, "max_df needs background_topic=True"),
    ({"death_grace": -1}, "death_grace is a number of refreshes"),
    ({"anchor_rectification": -1}, "anchor_rectification is a number of projection steps"),
    ({"half_life_unit": "years"}, "half_life_unit must be one of"),
    ({"reservoir_size": 0}, "reservoir_size is 'auto' or a positive number of documents"),
    ({"reservoir_size": "large"}, "reservoir_size is 'auto' or a positive number of documents"),
    ({"reservoir_size": None}, "reservoir_size is 'auto' or a positive number of documents"),
    ({"reservoir_size": True}, "reservoir_size is 'auto' or a positive number of documents"),
])
def test_an_invalid_setting_raises_with_a_clear_message(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ModelConfig(**settings)
    with pytest.raises(ValueError):
        StreamingTopicModel(settings.pop("n_topics", 2), **settings)


@pytest.mark.parametrize("n_topics, documents", [(1, 50_000), (20, 50_000), (32, 50_000), (50, 32_000),
                                                 (100, 16_000), (200, 16_000)])
def test_the_automatic_reservoir_is_a_budget_of_topic_documents(n_topics, documents):
    """1,600,000 / K documents, between 16,000 and 50,000: the model's reservoir holds that many,
    and an explicit size is kept as given."""
    words = [f"w{i}" for i in range(n_topics + 1)]
    model = StreamingTopicModel(n_topics, vocabulary=words)
    assert model.get_config()["reservoir_size"] == "auto"
    assert model.ingest.reservoir.capacity == documents == model.ingest.excerpts.capacity
    assert StreamingTopicModel(n_topics, vocabulary=words, reservoir_size=1234).ingest.reservoir.capacity == 1234


def test_an_unknown_setting_is_refused():
    with pytest.raises(TypeError, match="no_such_setting"):
        StreamingTopicModel(2, no_such_setting=1)
