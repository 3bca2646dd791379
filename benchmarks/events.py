"""Events against a known story: births, deaths and changes on stationary streams and on streams
with planted changes (docs/design.md, "Topic identity").

A **stationary** stream has nothing to announce once the burn-in ended: every birth, death or
return after it is churn. Its report: refreshes after the burn-in, births / deaths / returns /
changes / topics found after it, births and deaths per 10 refreshes, and the share of the ids
announced when the burn-in ended that are present at the end (``ids_kept``; ``ids_kept_listed``
counts the tentative ones too: new in that very refresh, listed as still in their birth grace,
never announced if they go within it). A topic *found* (a subject the
stream held all along, now told apart: docs/design.md, "Topic identity") is no birth.

* ``gibbs-<corpus>``: a Gibbs-truth stream of the quality protocol (tomotopy truths, cached in
  ``.artifacts/quality``; :mod:`benchmarks.quality.truths`);
* ``shuffled-20newsgroups``, ``shuffled-reuters``: the real archives (``../shared/data``; pass
  ``--data`` for another folder) in a seeded random order, the vocabulary learned from the
  warm-up as a user's replay learns it.

A **staged** stream, ``staged-20newsgroups``, is the real archive with its newsgroups brought in
one at a time: half of them (seeded) from the start, the others starting at 40, 45, ..., 85 % of the
stream's time line (each document at a uniform time between its group's start and the end; the
archive in time order). A birth *finds* a newsgroup's start when, at the refresh that announced it,
the born topic's mean inferred mixture weight (``model.infer``) over 50 of each newsgroup's posts
is highest for a newsgroup that started at most ``--window`` refreshes before; recall and
precision as below, over the starts after the burn-in (``starts_in_burn_in`` counts the others).
Newsgroups overlap (baseball and hockey, three on religion), so not every start is a subject new
to the stream: a start is a **new subject** when the newsgroup's dominant topic in the Gibbs truth
(20 Newsgroups, K = 20, as ``gibbs-20newsgroups``; the mean mixture of 300 of its posts, inferred
over the truth's topics) is no earlier newsgroup's. ``new_subjects`` and ``recall_new_subjects``
(``_within_2``) count those alone; ``hits`` names each start found and its delay.

A **planted** stream, ``planted-<corpus>``, is the Gibbs-truth stream with a story: its last
``--planted`` truth topics are absent until a third of the stream and then start; the ``--planted``
before them stop at two thirds (Dirichlet(alpha) mixtures over the topics alive). A birth *finds* a
planted start when the born topic is within half the distance between that planted truth topic and
its nearest other truth topic (L1 over the words: then it is nearer that truth topic than any
other), and the topic started at most ``--window`` refreshes before; a death finds a planted stop
likewise, with the topic's column when last seen. (Taking the nearest truth topic at any distance
credited births of unformed topics, 1.1 from the planted topic they lay nearest.) Recall: planted
changes found / planted (and found within 2 refreshes, the issue's bar); precision: births (deaths)
after the burn-in that find one / all of them; delay: refreshes from the first refresh that saw the
change to the event that found it (the birth and death graces included). Exact sums describe the
whole stream, so a topic that stops stays in them: its death is announced while they hold it (the
snapshot lists it as stopped; docs/design.md, "Topic identity"). With forgetting
(``--variants fr=half_life=10000,reservoir_size=14427``: the reservoir forgets it in about three
half-lives) the topic also goes.

A **reversed** stream, ``reversed-<corpus>``, is the planted stream with its stops at a third and its
starts at two thirds: exact sums keep the stopped subjects' fall, which the other topics' head
words share, for good (docs/design.md, "Topic identity").

A **drifting** stream, ``drifting-<corpus>``, is the Gibbs-truth stream whose last topic drifts
over the middle third (in :data:`DRIFT_STEPS` steps): its :data:`DRIFT_WORDS` most probable words
trade probabilities with the words it ranks :data:`DRIFT_FROM` onwards (20 Newsgroups K = 20: the
guns topic moves 0.54 in L1 towards "drug", "deadly", "bills", still nearer its start than any
other topic). A subject that drifts keeps its id: at every refresh after the burn-in the topic
nearest the drifting topic's truth at that point of the stream (by L1) should hold the same id,
with changes but no birth or death. Its report: the ids that followed it, the events on them, and
how far the followed topic ended from the truth at the start and at the end of the drift.

One draw of a stream says little about its planted changes (over ``--seed 1 2 3 4 5`` the planted
starts found within 2 refreshes went 1, 2, 2, 2, 2 of 2): with several seeds each draw is reported
and then a ``summed`` line adds their changes, the events and those that found one.

    python -m benchmarks.events
    python -m benchmarks.events --streams planted-20newsgroups --seed 1 2 3 4 5
    python -m benchmarks.events --streams reversed-20newsgroups --seed 1 2 3
    python -m benchmarks.events --streams planted-20newsgroups --variants default fr=half_life=10000,reservoir_size=14427
    python -m benchmarks.events --streams staged-20newsgroups --archive-every 1000
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchmarks.common import machine
from benchmarks.quality import truths
from benchmarks.quality.__main__ import CACHE
from benchmarks.quality.streams import draw
from benchmarks.quality.variants import describe, parse
from streamtopics import StreamingTopicModel
from streamtopics.refresh.alignment import l1_distances
from streamtopics.synthetic import sample_documents

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ARCHIVES = {"20newsgroups": "20newsgroups-bydate/20news-bydate.jsonl.gz",
            "reuters": "reuters21578/reuters21578.jsonl.gz"}
STREAMS = ("gibbs-20newsgroups", "shuffled-20newsgroups", "shuffled-reuters", "planted-20newsgroups",
           "reversed-20newsgroups", "staged-20newsgroups", "drifting-20newsgroups")
STAGED_FIRST, STAGED_STEP = 0.40, 0.05  # where on the time line the first staged newsgroup starts, and the next ones
MATCH_POSTS = 50  # posts of each newsgroup whose inferred mixtures match a born topic to a newsgroup
TRUTH_POSTS = 300  # posts of each newsgroup whose mixtures over the Gibbs truth name its dominant subject
DRIFT_WORDS, DRIFT_FROM, DRIFT_STEPS = 60, 300, 10  # head words that trade places, the rank of their partners, steps


def planted_stream(truth, n_docs: int, alpha: float, planted: int, seed: int = 1, stops_first: bool = False):
    """The counts of a Gibbs-truth stream whose last ``planted`` topics start at a third of it
    and the ``planted`` before them stop at two thirds (``stops_first``: the other way round); with
    the documents where they do, and which topics start and which stop."""
    k = truth.topic_word.shape[1]
    starting, stopping = list(range(k - planted, k)), list(range(k - 2 * planted, k - planted))
    start_at, stop_at = n_docs // 3, 2 * n_docs // 3
    if stops_first:
        start_at, stop_at = stop_at, start_at
    rng = np.random.default_rng(seed)
    alive = np.ones((n_docs, k), bool)
    alive[:start_at, starting] = False
    alive[stop_at:, stopping] = False
    mixtures = np.where(alive, rng.dirichlet(np.full(k, alpha), n_docs), 0.0)
    mixtures = np.maximum(mixtures, 1e-300 * alive)  # a row whose alive topics all drew 0 stays valid
    lengths = rng.choice(truth.lengths[truth.lengths >= 2], size=n_docs, replace=True)
    counts = sample_documents(truth.topic_word, mixtures, lengths, seed=rng)
    return counts, {"start": (start_at, starting), "stop": (stop_at, stopping)}


def drifting_stream(truth, n_docs: int, alpha: float, seed: int = 1):
    """The counts of a Gibbs-truth stream whose last topic drifts over the middle third (see the
    module docstring), and the drift: where it starts and ends, the topic, and its truth after."""
    k = truth.topic_word.shape[1] - 1
    start, end = n_docs // 3, 2 * n_docs // 3
    ranked = np.argsort(-truth.topic_word[:, k], kind="stable")
    head, tail = ranked[:DRIFT_WORDS], ranked[DRIFT_FROM:DRIFT_FROM + DRIFT_WORDS]
    drifted = truth.topic_word[:, k].copy()
    drifted[head], drifted[tail] = truth.topic_word[tail, k], truth.topic_word[head, k]
    rng = np.random.default_rng(seed)
    mixtures = rng.dirichlet(np.full(k + 1, alpha), n_docs)
    lengths = rng.choice(truth.lengths[truth.lengths >= 2], size=n_docs, replace=True)
    edges = np.unique(np.concatenate([[0], np.linspace(start, end, DRIFT_STEPS + 1).astype(int), [n_docs]]))
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        topics = truth.topic_word.copy()
        topics[:, k] = _drifted_at(truth.topic_word[:, k], drifted, (lo + hi) / 2, start, end)
        parts.append(sample_documents(topics, mixtures[lo:hi], lengths[lo:hi], seed=rng))
    return sp.vstack(parts).tocsr(), {"start": start, "end": end, "topic": k, "drifted": drifted}


def _drifted_at(before: np.ndarray, after: np.ndarray, position: float, start: int, end: int) -> np.ndarray:
    """The drifting topic at a point of the stream: ``before`` until ``start``, ``after`` from
    ``end``, moving linearly between."""
    weight = min(max((position - start) / (end - start), 0.0), 1.0)
    return (1 - weight) * before + weight * after


def drift_report(snapshots: list, truth_topics: np.ndarray, story: dict, every: int) -> dict:
    """Which ids followed the drifting topic after the burn-in (the topic nearest its truth at
    each refresh's last document), the events on them, and how far the last one ended from the
    topic's truth before and after the drift."""
    settled = next((i for i, s in enumerate(snapshots) if not s.forming), len(snapshots))
    before, after = truth_topics[:, story["topic"]], story["drifted"]
    ids, events = [], {}
    for r, snapshot in enumerate(snapshots):
        if r < settled:
            continue
        truth = _drifted_at(before, after, (r + 1) * every, story["start"], story["end"])
        column = int(np.argmin(l1_distances(truth[:, None], snapshot.topic_word)[0]))
        ids.append(snapshot.topic_ids[column])
        if r > settled:
            for event in snapshot.events:
                if event["topic"] in set(ids):
                    events[event["type"]] = events.get(event["type"], 0) + 1
    last = snapshots[-1].topic_word[:, snapshots[-1].column(ids[-1])][:, None] if ids else None
    return {"ids": sorted(set(ids), key=ids.index), "kept": len(set(ids)) == 1, "events": events,
            "from_start": None if last is None else round(float(l1_distances(before[:, None], last)[0, 0]), 3),
            "from_end": None if last is None else round(float(l1_distances(after[:, None], last)[0, 0]), 3),
            "drift": round(float(np.abs(after - before).sum()), 3)}


def archive_records(corpus: str, data: Path) -> tuple[list[str], list[str | None]]:
    """The archive's texts (title and body where it has them) and labels, in file order."""
    texts, labels = [], []
    with gzip.open(data / ARCHIVES[corpus], "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            text = " ".join(str(record[f]) for f in ("title", "body", "text") if record.get(f))
            if text:
                texts.append(text)
                labels.append(record.get("label"))
    return texts, labels


def archive_texts(corpus: str, data: Path, seed: int) -> list[str]:
    """The archive's texts in a seeded random order."""
    texts, _ = archive_records(corpus, data)
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order]


def staged_stream(data: Path, seed: int) -> tuple[list[str], list[str], dict[str, int], dict[str, list[str]]]:
    """20 Newsgroups with its newsgroups brought in one at a time (see the module docstring): the
    texts in time order, their newsgroups, where each staged newsgroup's first post is, and
    ``MATCH_POSTS`` posts of every newsgroup to match born topics with."""
    texts, labels = archive_records("20newsgroups", data)
    rng = np.random.default_rng(seed)
    groups = [str(g) for g in rng.permutation(sorted(set(labels)))]
    staged = groups[len(groups) // 2:]
    start = {g: (STAGED_FIRST + STAGED_STEP * staged.index(g) if g in staged else 0.0) for g in groups}
    times = np.array([rng.uniform(start[g], 1.0) for g in labels])
    order = np.argsort(times, kind="stable")
    texts, labels = [texts[i] for i in order], [labels[i] for i in order]
    first = {g: labels.index(g) for g in staged}
    samples = {g: [t for t, label in zip(texts, labels) if label == g][::7][:MATCH_POSTS] for g in groups}
    return texts, labels, first, samples


def new_subject_starts(first: dict[str, int], data: Path, cache: Path) -> set[str]:
    """The staged newsgroups (``first``: where each starts) whose dominant topic in the 20 Newsgroups
    Gibbs truth (K = 20) is no earlier newsgroup's: subjects new to the stream (module docstring)."""
    from benchmarks.quality.corpora import word_counts
    from streamtopics.inference import infer_mixtures
    from streamtopics.text.documents import DocumentBatch
    from streamtopics.text.tokenizer import Tokenizer

    truth = truths.load("20newsgroups", 20, cache=cache)
    index = {word: i for i, word in enumerate(truth.vocabulary)}
    texts, labels = archive_records("20newsgroups", data)
    dominant = {}
    for group in sorted(set(labels)):
        counts = word_counts([t for t, label in zip(texts, labels) if label == group][:TRUTH_POSTS], index,
                             Tokenizer(strip_mail=False))
        mixtures = infer_mixtures(DocumentBatch.from_csr(counts), truth.topic_word)
        dominant[group] = int(np.argmax(mixtures.mean(axis=0)))
    held = {dominant[group] for group in dominant if group not in first}
    new = set()
    for group in sorted(first, key=first.get):
        if dominant[group] not in held:
            new.add(group)
        held.add(dominant[group])
    return new


def follow(model: StreamingTopicModel, chunks, after=None) -> list:
    """Feed the chunks, refreshing after each; every snapshot (with ``after(model, snapshot)``
    next to it when given)."""
    snapshots = []
    for chunk in chunks:
        model.learn_many(chunk)
        snapshot = model.refresh()
        snapshots.append(snapshot if after is None else (snapshot, after(model, snapshot)))
    return snapshots


def born_groups(model: StreamingTopicModel, snapshot, samples: dict[str, list[str]]) -> dict[int, str]:
    """Each topic born in ``snapshot``: the newsgroup whose sample posts give it the highest mean
    inferred weight."""
    born = [event["topic"] for event in snapshot.events if event["type"] == "birth"]
    if not born:
        return {}
    names = list(samples)
    means = np.array([model.infer(samples[name]).mean(axis=0) for name in names])
    return {topic: names[int(np.argmax(means[:, snapshot.column(topic)]))] for topic in born}


def staged_found(snapshots: list, matches: list, first: dict[str, int], every: int, window: int,
                 new_subjects: set[str] = frozenset()) -> dict:
    """Recall, precision and delays of the births after the burn-in against the staged
    newsgroups' starts, and recall over the starts of ``new_subjects`` (see the module docstring)."""
    settled = next((i for i, s in enumerate(snapshots) if not s.forming), len(snapshots))
    changed = {group: position // every for group, position in first.items()}  # the refresh that first saw it
    findable = {group for group, r in changed.items() if r >= settled}
    hits, events = {}, 0
    for r, born in enumerate(matches):
        if r <= settled:
            continue
        for group in born.values():
            events += 1
            if group in findable and group not in hits and changed[group] <= r <= changed[group] + window:
                hits[group] = r - changed[group]
    n, new = max(len(findable), 1), findable & set(new_subjects)
    delays, new_delays = list(hits.values()), [d for g, d in hits.items() if g in new]
    return {"changes": len(findable), "starts_in_burn_in": len(first) - len(findable), "recall": len(hits) / n,
            "recall_within_2": sum(d <= 2 for d in delays) / n,
            "precision": len(hits) / events if events else float("nan"), "events": events, "delays": delays,
            "hits": hits, "new_subjects": sorted(new), "recall_new_subjects": len(new_delays) / max(len(new), 1),
            "recall_new_subjects_within_2": sum(d <= 2 for d in new_delays) / max(len(new), 1)}


def churn(snapshots: list) -> dict:
    """What happened after the burn-in of a stream with nothing to announce."""
    settled = next((i for i, s in enumerate(snapshots) if not s.forming), None)
    counts = {"birth": 0, "death": 0, "return": 0, "change": 0, "found": 0}
    if settled is None:
        return {"refreshes": 0, **counts, "per_10": float("nan"), "ids_kept": float("nan")}
    for snapshot in snapshots[settled + 1:]:
        for event in snapshot.events:
            counts[event["type"]] = counts.get(event["type"], 0) + 1
    after = len(snapshots) - settled - 1
    listed, last = set(snapshots[settled].topic_ids), set(snapshots[-1].topic_ids)
    announced = listed - set(snapshots[settled].tentative or ())
    return {"refreshes": after, **counts, "per_10": 10 * (counts["birth"] + counts["death"]) / max(after, 1),
            "ids_kept": len(announced & last) / max(len(announced), 1),
            "ids_kept_listed": len(listed & last) / len(listed)}


def found(snapshots: list, truth_topics: np.ndarray, story: dict, every: int, window: int) -> dict:
    """Recall, precision and delays of the births and deaths after the burn-in against the
    planted starts and stops (see the module docstring)."""
    settled = next((i for i, s in enumerate(snapshots) if not s.forming), len(snapshots))
    between = l1_distances(truth_topics, truth_topics)
    np.fill_diagonal(between, np.inf)
    reach = between.min(axis=1) / 2  # nearer a truth topic than this: nearer it than any other
    last_seen = {}
    report = {}
    for kind, event_type in (("start", "birth"), ("stop", "death")):
        at, planted = story[kind]
        changed = (at + every - 1) // every - 1  # the first refresh whose documents include the change
        hits, events, delays = set(), 0, []
        for r, snapshot in enumerate(snapshots):
            if r > settled:
                for event in snapshot.events:
                    if event["type"] != event_type:
                        continue
                    events += 1
                    column = (snapshot.topic_word[:, snapshot.column(event["topic"])] if event_type == "birth"
                              else last_seen.get(event["topic"]))
                    if column is None:
                        continue
                    distance = l1_distances(truth_topics, column[:, None])[:, 0]
                    nearest = int(np.argmin(distance))
                    if (nearest in planted and distance[nearest] < reach[nearest] and changed <= r <= changed + window
                            and nearest not in hits):
                        hits.add(nearest)
                        delays.append(r - changed)
            for k, topic in enumerate(snapshot.topic_ids):
                last_seen[topic] = snapshot.topic_word[:, k]
        report[event_type] = {"changes": len(planted), "recall": len(hits) / len(planted),
                              "recall_within_2": sum(d <= 2 for d in delays) / len(planted),
                              "precision": len(hits) / events if events else float("nan"), "events": events,
                              "delays": delays}
    return report


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", nargs="+", default=list(STREAMS))
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--docs", type=int, default=100_000, help="documents of a Gibbs-truth stream")
    parser.add_argument("--every", type=int, default=5_000, help="documents between refreshes (Gibbs-truth)")
    parser.add_argument("--archive-every", type=int, default=2_000, help="documents between refreshes (archives)")
    parser.add_argument("--planted", type=int, default=2, help="topics that start, and topics that stop")
    parser.add_argument("--window", type=int, default=5, help="refreshes within which an event finds a change")
    parser.add_argument("--variants", nargs="+", default=["default"], help="model settings, as benchmarks.quality's")
    parser.add_argument("--seed", type=int, nargs="+", default=[1],
                        help="stream draws (the archives' shuffles, the Gibbs-truth streams); with several, the "
                             "planted and staged streams' events are also summed over them")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args(argv)
    print(f"# {machine()}")
    for variant in args.variants:
        label, settings = parse(variant)
        for name in args.streams:
            results = []
            for seed in args.seed:
                results.append(run_stream(name, settings, args, seed))
                print(json.dumps({"stream": name, "variant": f"{label} ({describe(settings)})", "seed": seed,
                                  **results[-1]}), flush=True)
            if len(results) > 1 and (total := summed(results)):
                print(json.dumps({"stream": name, "variant": f"{label} ({describe(settings)})", "seeds": args.seed,
                                  "summed": total}), flush=True)


def summed(results: list[dict]) -> dict:
    """The planted or staged changes of several draws added up: the changes, those an event found
    (within 2 refreshes, and at all), the events, and the share of them that found one (the staged
    new subjects' starts too, recall only)."""
    total = {}
    for result in results:
        reports = dict(result.get("planted", {}))
        if "staged" in result:
            staged = result["staged"]
            reports["birth"] = staged
            reports["birth_of_new_subject"] = {"changes": len(staged["new_subjects"]), "events": 0, "delays": [
                delay for group, delay in staged["hits"].items() if group in staged["new_subjects"]]}
        for kind, report in reports.items():
            row = total.setdefault(kind, dict.fromkeys(("changes", "found_within_2", "found", "events"), 0))
            row["changes"] += report["changes"]
            row["found_within_2"] += sum(d <= 2 for d in report["delays"])
            row["found"] += len(report["delays"])
            row["events"] += report["events"]
    for kind, row in total.items():
        if kind == "birth_of_new_subject":  # recall only: every birth counts in the births' precision
            del row["events"]
        else:
            row["precision"] = row["found"] / row["events"] if row["events"] else float("nan")
    return total


def run_stream(name: str, settings: dict, args, seed: int) -> dict:
    """One stream's report (see the module docstring) under the model ``settings``, drawn with ``seed``."""
    kind, corpus = name.split("-", 1)
    if kind == "staged":
        texts, _, first, samples = staged_stream(args.data, seed)
        model = StreamingTopicModel(args.topics, seed=0, **settings)
        chunks = (texts[s:s + args.archive_every] for s in range(0, len(texts), args.archive_every))
        followed = follow(model, chunks, lambda model, snapshot: born_groups(model, snapshot, samples))
        snapshots, matches = [s for s, _ in followed], [m for _, m in followed]
        new_subjects = new_subject_starts(first, args.data, args.cache)
        return {"documents": len(texts), **churn(snapshots),
                "staged": staged_found(snapshots, matches, first, args.archive_every, args.window, new_subjects)}
    if kind == "shuffled":
        texts = archive_texts(corpus, args.data, seed)
        model = StreamingTopicModel(args.topics, seed=0, **settings)
        snapshots = follow(model, (texts[s:s + args.archive_every] for s in range(0, len(texts), args.archive_every)))
        return {"documents": len(texts), **churn(snapshots)}
    truth = truths.load(corpus, args.topics, cache=args.cache)
    model = StreamingTopicModel(args.topics, vocabulary=list(truth.vocabulary), seed=0, **settings)
    if kind == "gibbs":
        counts, story = draw(truth, args.docs, args.alpha, seed=seed), None
    elif kind == "drifting":
        counts, story = drifting_stream(truth, args.docs, args.alpha, seed)
    else:
        counts, story = planted_stream(truth, args.docs, args.alpha, args.planted, seed, stops_first=kind == "reversed")
    snapshots = follow(model, (counts[s:s + args.every] for s in range(0, args.docs, args.every)))
    result = {"documents": args.docs, **churn(snapshots)}
    if kind == "drifting":
        result["drifting"] = drift_report(snapshots, truth.topic_word, story, args.every)
    elif story is not None:
        result["planted"] = found(snapshots, truth.topic_word, story, args.every, args.window)
    return result

if __name__ == "__main__":
    main()
