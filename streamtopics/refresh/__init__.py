"""The refresh: statistics in, a snapshot out (:mod:`~streamtopics.refresh.steps` runs the named steps).

Anchor words (``anchor_selection``, with ``anchors``, ``rectification``, ``candidate_clustering``),
recovery of the topics from them (``recovery``, ``l2_recovery``, ``kl_recovery``, ``warm_start``),
the seeded refinement over the reservoir (``reservoir``, ``refinement``, ``kl_tem``, ``collapsed``;
on a GPU ``gpu``, ``gpu_kernels``, ``device``), the ids kept from snapshot to snapshot and the
events (``lineage``, ``alignment``), and what describes the topics (``describe``, ``labels``).
"""
