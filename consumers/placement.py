"""Where a partition newly assigned to a consumer starts reading, and the commit metadata that decides it.

A consumer's checkpoint, not the group's committed offsets, says where its partitions resume. But
when another member of the group committed further (its checkpoint holds those documents), the
partition starts at that commit. Commits carry the committing member's id in their metadata
(:func:`commit_metadata`) so that a consumer can tell another member's commit from its own.
"""

from __future__ import annotations

import json


def commit_metadata(member_id: str, checkpoint: int) -> str:
    """The metadata of an offset commit by ``member_id`` after its checkpoint ``checkpoint``."""
    return json.dumps({"member": member_id, "checkpoint": checkpoint})


def commit_member(metadata: str | None) -> str | None:
    """The member id in a commit's metadata; None when there is none (anyone in the group may write it)."""
    try:
        return json.loads(metadata or "").get("member")
    except (ValueError, AttributeError, RecursionError):
        return None


def start_offset(consumer, tp, own: int | None, member_id: str, auto_offset_reset: str, timeout_ms: int) -> int:
    """Where ``tp`` starts: ``own`` (the checkpoint's offset, as the consumer's role sees it),
    unless another member committed further (its statistics hold those documents); for a
    partition nobody read, ``auto_offset_reset``."""
    committed = consumer.committed(tp, metadata=True, timeout_ms=timeout_ms)
    if committed is not None and committed.offset >= 0 and commit_member(committed.metadata) != member_id:
        if own is None or committed.offset > own:
            return committed.offset
    if own is not None:
        return own
    if auto_offset_reset == "latest":
        return consumer.end_offsets([tp])[tp]
    return consumer.beginning_offsets([tp])[tp]
