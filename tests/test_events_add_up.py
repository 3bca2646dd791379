"""The events add up (issue 46): from the end of the burn-in, every topic a snapshot lists was
announced as born, or is marked tentative, or stopped (announced dead while the sums still hold it),
and every announced topic it lacks is marked missing until its death is announced; checked against a
ledger of the events kept here."""

import numpy as np
import pytest

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.synthetic import semi_synthetic, separable_topics

V, K = 400, 8
WORDS = [f"w{i}" for i in range(V)]


def ledger_problems(snapshots: list[TopicSnapshot], death_grace: int) -> list[str]:
    """What contradicts the events: the announced topics are the births, topics found and returns
    less the deaths and topics lost; a snapshot lists the announced ones (less its missing) plus its tentative and
    stopped ones, and a topic stays missing at most ``death_grace`` + 1 snapshots in a row before its death."""
    problems, announced, away = [], None, {}
    for s in snapshots:
        if s.forming:
            if s.tentative or s.missing or s.stopped:
                problems.append(f"{s.version}: tentative or missing during the burn-in")
            continue
        announced = set() if announced is None else announced
        for event in s.events:
            topic = event["topic"]
            if event["type"] in ("birth", "found", "return"):
                if topic in announced:
                    problems.append(f"{s.version}: {topic} announced twice")
                announced.add(topic)
            elif event["type"] in ("death", "lost"):
                if topic not in announced:
                    problems.append(f"{s.version}: death of {topic}, never announced")
                announced.discard(topic)
        present, tentative, stopped = set(s.topic_ids), set(s.tentative), set(s.stopped)
        if not tentative <= present or tentative & announced:
            problems.append(f"{s.version}: tentative {sorted(tentative)} not new topics of the snapshot")
        if not stopped <= present or stopped & (announced | tentative):
            problems.append(f"{s.version}: stopped {sorted(stopped)} not dead topics of the snapshot")
        if present - tentative - stopped != announced - set(s.missing):
            problems.append(f"{s.version}: lists {sorted(present - tentative - stopped)}, announced and not missing "
                            f"{sorted(announced - set(s.missing))}")
        away = {t: away.get(t, 0) + 1 for t in s.missing}
        problems += [f"{s.version}: {t} missing {n} snapshots" for t, n in away.items() if n > death_grace + 1]
    return problems


def test_the_ledger_catches_a_topic_listed_unannounced():
    topics = np.full((3, 2), 1 / 3)
    first = TopicSnapshot(1, 10, ["a", "b", "c"], topics, ["a", "b"], [0, 1], np.ones(2) / 2, np.ones(2),
                          events=[{"type": "birth", "topic": 0}, {"type": "birth", "topic": 1}])
    second = TopicSnapshot(2, 20, ["a", "b", "c"], topics, ["a", "c"], [0, 2], np.ones(2) / 2, np.ones(2),
                           missing=[1])
    assert ledger_problems([first, second], 2) == ["2: lists [0, 2], announced and not missing [0]"]
    second.tentative = [2]
    assert ledger_problems([first, second], 2) == []
    assert ledger_problems([first, second, second, second, second], 2) == ["2: 1 missing 4 snapshots"]
    second.stopped = [0]  # stopped without a death
    assert ledger_problems([first, second], 2) == ["2: stopped [0] not dead topics of the snapshot",
                                                   "2: lists [], announced and not missing [0]"]


@pytest.mark.parametrize("story", ["0 stops, 8 starts", "8 starts"])
def test_births_deaths_tentative_stopped_and_missing_topics_add_up_over_a_changing_stream(story):
    """Two stories with eight slots: topic 0 stops as topic 8 starts (a stop while exact sums hold
    topic 0: births, a death, stopped topics), or topic 8 starts beside the eight (nine subjects
    crowd eight slots: missing topics)."""
    truth = separable_topics(V, K + 1, anchor_mass=0.05, seed=3).topic_word
    early, _ = semi_synthetic(truth[:, :K], 6000, alpha=0.1, doc_length=150, seed=4)  # topics 0-7
    late, _ = semi_synthetic(truth[:, 1:] if story.startswith("0 stops") else truth, 9000, alpha=0.1,
                             doc_length=150, seed=5)
    model = StreamingTopicModel(K, vocabulary=WORDS, burn_in=2, birth_grace=1, death_grace=2)
    snapshots = []
    for part in (early, late):
        for start in range(0, part.shape[0], 750):
            model.learn_many(part[start:start + 750])
            snapshots.append(model.refresh())
    assert ledger_problems(snapshots, model.config.death_grace) == []
    settled = [s for s in snapshots if not s.forming]
    kinds = {e["type"] for s in settled[1:] for e in s.events}
    assert "birth" in kinds and any(s.tentative for s in settled)  # the ledger had something to check
    if story.startswith("0 stops"):
        assert "death" in kinds and any(s.stopped for s in settled)
    else:
        assert any(s.missing for s in settled)
    again = TopicSnapshot.from_dict(snapshots[-1].to_dict())
    assert ((again.tentative, again.missing, again.stopped)
            == (snapshots[-1].tentative, snapshots[-1].missing, snapshots[-1].stopped))
