"""The snapshot directory every writer and reader shares: names, order, pruning, latest."""

import numpy as np

from consumers.snapshot_directory import SnapshotDirectory
from streamtopics import TopicSnapshot


def snapshot(version: int) -> TopicSnapshot:
    return TopicSnapshot(version=version, documents_seen=10 * version, vocabulary=["a", "b"],
                         topic_word=np.array([[0.5], [0.5]]), anchors=["a"], topic_ids=[0],
                         prevalence=np.array([1.0]), alpha=np.array([0.1]))


def test_names_order_pruning_and_latest(tmp_path):
    assert SnapshotDirectory(tmp_path / "absent").files() == []
    directory = SnapshotDirectory(tmp_path, keep=3)
    for version in (1, 2, 999_999, 1_000_000):
        directory.save(snapshot(version))
    (tmp_path / "snapshot-notes.json").write_text("{}")  # not a snapshot name: never listed or pruned
    assert [p.name for p in directory.files()] == [
        "snapshot-000002.json", "snapshot-999999.json", "snapshot-1000000.json"]
    assert SnapshotDirectory.version_of(directory.files()[-1]) == 1_000_000
    assert directory.latest().version == 1_000_000
    (tmp_path / "snapshot-1000000.json").write_text("{torn")
    assert directory.latest().version == 999_999
    assert directory.load(2).documents_seen == 20 and directory.load(1) is None
    assert (tmp_path / "snapshot-notes.json").exists()
