"""The state store shared by the members of a scale-out group (:mod:`consumers.group`).

A :class:`StateStore` holds, for every worker, its partial checkpoints (the statistics of the
documents it absorbed and, per partition, the offset ranges they cover), the snapshots the
refresher publishes, and the refresher's own small state (warm-start point, next topic id).
:class:`DirectoryStateStore` keeps them in one directory (local, or a shared file system)::

    ROOT/members/<worker>/ckpt-*.state|json   a worker's CheckpointStore (it alone writes there)
    ROOT/snapshots/                            full snapshots published by the refresher
                                               (a :class:`~consumers.snapshot_directory.SnapshotDirectory`)
    ROOT/refresher/                            the refresher's warm-start state; refresher.lock
                                               is the lease that elects one refresher

An object store can implement the same interface later: partial checkpoints are written whole
and replaced atomically, readers only ever need the newest intact one per member, and the
refresher lease maps onto a conditional write (create-if-absent with an expiry).
"""

from __future__ import annotations

import abc
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streamtopics import CorruptStateError, StreamingTopicModel, TopicSnapshot
from streamtopics.state import atomic_write_bytes

from .checkpoint import Checkpoint, CheckpointStore, Offsets, lock_exclusively
from .snapshot_directory import SnapshotDirectory

log = logging.getLogger("streamtopics.store")

Ranges = dict[tuple[str, int], list[tuple[int, int]]]  # (topic, partition) -> [(start, end), ...]


@dataclass(frozen=True)
class Partial:
    """A worker's newest checkpoint: who wrote it, the offsets and offset ranges it counts."""

    member: str
    checkpoint: Checkpoint

    @property
    def ranges(self) -> Ranges:
        out: Ranges = {}
        for name, spans in self.checkpoint.counters.get("ranges", {}).items():
            topic, _, partition = name.rpartition("/")
            kept = [(int(a), int(b)) for a, b in spans if int(b) > int(a)]
            if kept:
                out[(topic, int(partition))] = kept
        return out

    @property
    def key(self) -> tuple[str, int]:
        return self.member, self.checkpoint.sequence


class StateStore(abc.ABC):
    """Where a group's partial states and snapshots live (see the module docstring)."""

    @abc.abstractmethod
    def partials(self) -> list[Partial]:
        """The newest intact partial checkpoint of every worker, by member name."""

    @abc.abstractmethod
    def load_partial(self, partial: Partial) -> StreamingTopicModel:
        """The model (partial statistics) of one partial checkpoint."""

    @abc.abstractmethod
    def save_snapshot(self, snapshot: TopicSnapshot) -> None: ...

    @abc.abstractmethod
    def snapshot(self, version: int) -> TopicSnapshot | None: ...

    @abc.abstractmethod
    def latest_snapshot(self) -> TopicSnapshot | None: ...

    @abc.abstractmethod
    def save_refresher_state(self, coefficients: np.ndarray | None, next_topic_id: int, version: int) -> None: ...

    @abc.abstractmethod
    def load_refresher_state(self) -> tuple[np.ndarray | None, int, int] | None: ...

    @abc.abstractmethod
    def try_refresher_lease(self) -> RefresherLease | None:
        """Become the group's one refresher: a held lease, or None while another process holds
        it. The lease ends when released or when its holder dies."""

    # ------------------------------------------------------------------ derived
    def checkpointed_offset(self, topic: str, partition: int, exclude: str | None = None) -> int | None:
        """The furthest offset any member (but ``exclude``) checkpointed for a partition: where
        its next owner must start so that each document is counted by exactly one worker."""
        best = None
        for partial in self.partials():
            if partial.member == exclude:
                continue
            offset = partial.checkpoint.offsets.get((topic, partition))
            if offset is not None and (best is None or offset > best):
                best = offset
        return best


class RefresherLease(abc.ABC):
    """Proof of being the group's refresher (see :meth:`StateStore.try_refresher_lease`)."""

    @abc.abstractmethod
    def release(self) -> None: ...


class _FileLockLease(RefresherLease):
    """An exclusive ``flock`` on a file: the kernel (or the shared file system's lock manager)
    drops it when the holding process dies, so a standby takes over without a timeout."""

    def __init__(self, descriptor: int | None):
        self._descriptor = descriptor

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


class DirectoryStateStore(StateStore):
    def __init__(self, root, keep_snapshots: int = 10):
        self.root = Path(root)
        self.members_dir = self.root / "members"
        self.snapshot_dir = self.root / "snapshots"
        self.refresher_dir = self.root / "refresher"
        self.snapshots = SnapshotDirectory(self.snapshot_dir, keep=keep_snapshots)
        for directory in (self.members_dir, self.snapshot_dir, self.refresher_dir):
            directory.mkdir(parents=True, exist_ok=True)

    def member_dir(self, member: str) -> Path:
        if not member or "/" in member or member.startswith("."):
            raise ValueError(f"bad member name {member!r}")
        return self.members_dir / member

    def partials(self) -> list[Partial]:
        found = []
        for directory in sorted(self.members_dir.iterdir()):
            if not directory.is_dir() or directory.name.startswith("."):
                continue
            checkpoint = CheckpointStore.reader(directory).latest()
            if checkpoint is not None:
                found.append(Partial(directory.name, checkpoint))
        return found

    def load_partial(self, partial: Partial) -> StreamingTopicModel:
        return StreamingTopicModel.load(partial.checkpoint.state_path)

    def save_snapshot(self, snapshot: TopicSnapshot) -> None:
        self.snapshots.save(snapshot)

    def snapshot(self, version: int) -> TopicSnapshot | None:
        return self.snapshots.load(version)

    def latest_snapshot(self) -> TopicSnapshot | None:
        return self.snapshots.latest()

    def save_refresher_state(self, coefficients, next_topic_id: int, version: int) -> None:
        if coefficients is not None:
            encoded = io.BytesIO()
            np.save(encoded, coefficients)
            atomic_write_bytes(self.refresher_dir / f"coefficients-{version:06d}.npy", encoded.getvalue())
        atomic_write_bytes(self.refresher_dir / "state.json", json.dumps(
            {"version": version, "next_topic_id": next_topic_id,
             "coefficients": None if coefficients is None else f"coefficients-{version:06d}.npy"}).encode())
        for old in self.refresher_dir.glob("coefficients-*.npy"):
            if old.name != f"coefficients-{version:06d}.npy":
                old.unlink(missing_ok=True)

    def load_refresher_state(self):
        path = self.refresher_dir / "state.json"
        if not path.exists():
            return None
        try:
            state = json.loads(path.read_text())
            coefficients = None if state["coefficients"] is None else np.load(self.refresher_dir / state["coefficients"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
            log.error("refresher state unreadable (%s): next refresh starts cold", error)
            return None
        return coefficients, int(state["next_topic_id"]), int(state["version"])

    def try_refresher_lease(self) -> RefresherLease | None:
        try:
            return _FileLockLease(lock_exclusively(self.refresher_dir / "refresher.lock", "held"))
        except RuntimeError:
            return None

    def __repr__(self) -> str:
        return f"DirectoryStateStore({str(self.root)!r})"


def overlaps(partials: list[Partial]) -> list[str]:
    """Offset ranges counted by two partial states (must be none): one line per overlap."""
    spans: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for partial in partials:
        for position, ranges in partial.ranges.items():
            spans.setdefault(position, []).extend((a, b, partial.member) for a, b in ranges)
    found = []
    for (topic, partition), items in sorted(spans.items()):
        items.sort()
        for (a0, b0, m0), (a1, b1, m1) in zip(items, items[1:]):
            if a1 < b0:
                found.append(f"{topic}/{partition}: [{a0},{b0}) of {m0} and [{a1},{b1}) of {m1}")
    return found


def coverage(partials: list[Partial]) -> Ranges:
    """The union of the offset ranges the partial states count, per partition."""
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for partial in partials:
        for position, ranges in partial.ranges.items():
            spans.setdefault(position, []).extend(ranges)
    out: Ranges = {}
    for position, items in spans.items():
        merged: list[list[int]] = []
        for a, b in sorted(items):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        out[position] = [tuple(m) for m in merged]
    return out


def frontier(partials: list[Partial]) -> Offsets:
    """Per partition, the furthest offset any partial state checkpointed."""
    out: Offsets = {}
    for partial in partials:
        for position, offset in partial.checkpoint.offsets.items():
            out[position] = max(offset, out.get(position, offset))
    return out


def merge_partials(store: StateStore, partials: list[Partial]) -> StreamingTopicModel:
    """The sum of the partial states (loaded one at a time: at most two in memory)."""
    merged = None
    for partial in partials:
        model = store.load_partial(partial)
        merged = model if merged is None else merged.merge(model)
        del model
    if merged is None:
        raise RuntimeError("no partial state to merge")
    return merged


__all__ = ["StateStore", "DirectoryStateStore", "Partial", "overlaps", "coverage", "frontier",
           "merge_partials", "CorruptStateError"]
