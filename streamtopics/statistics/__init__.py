"""What the ingest kernels update (:class:`~streamtopics.statistics.combined.Statistics` keeps them in
step): the co-occurrence sums, exact (``cooccurrence``) or sketched (``sketch``, read through
``sketch_view``), the random-projection trackers (``trackers``, ``tracker_kernels``, ``directions``),
forgetting (``forgetting``) and the sliding window (``window``)."""
