"""The events add up (issue 46): from the end of the burn-in, every topic a snapshot lists was
announced as born or is marked tentative, and every announced topic it lacks is marked missing
until its death is announced; checked against a ledger of the events kept here."""

import numpy as np

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.synthetic import semi_synthetic, separable_topics

V, K = 400, 8
WORDS = [f"w{i}" for i in range(V)]


def ledger_problems(snapshots: list[TopicSnapshot], death_grace: int) -> list[str]:
    """What contradicts the events: the announced topics are the births, topics found and returns
    less the deaths and topics lost; a snapshot lists the announced ones (less its missing) plus its tentative ones, and a
    topic stays missing at most ``death_grace`` + 1 snapshots in a row before its death."""
    problems, announced, away = [], None, {}
    for s in snapshots:
        if s.forming:
            if s.tentative or s.missing:
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
        present, tentative = set(s.topic_ids), set(s.tentative)
        if not tentative <= present or tentative & announced:
            problems.append(f"{s.version}: tentative {sorted(tentative)} not new topics of the snapshot")
        if present - tentative != announced - set(s.missing):
            problems.append(f"{s.version}: lists {sorted(present - tentative)}, announced and not missing "
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


def test_births_deaths_tentative_and_missing_topics_add_up_over_a_changing_stream():
    truth = separable_topics(V, K + 1, anchor_mass=0.05, seed=3).topic_word
    early, _ = semi_synthetic(truth[:, :K], 6000, alpha=0.1, doc_length=150, seed=4)  # topics 0-7
    late, _ = semi_synthetic(truth[:, 1:], 9000, alpha=0.1, doc_length=150, seed=5)  # 0 stops, 8 starts
    model = StreamingTopicModel(K, vocabulary=WORDS, burn_in=2, birth_grace=1, death_grace=2)
    snapshots = []
    for part in (early, late):
        for start in range(0, part.shape[0], 750):
            model.learn_many(part[start:start + 750])
            snapshots.append(model.refresh())
    assert ledger_problems(snapshots, model.config.death_grace) == []
    settled = [s for s in snapshots if not s.forming]
    kinds = {e["type"] for s in settled[1:] for e in s.events}
    assert {"birth", "death"} <= kinds  # the stream changed: the ledger had something to check
    assert any(s.tentative for s in settled) and any(s.missing for s in settled)
    again = TopicSnapshot.from_dict(snapshots[-1].to_dict())
    assert (again.tentative, again.missing) == (snapshots[-1].tentative, snapshots[-1].missing)
