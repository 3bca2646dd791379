"""Topic quality on truths no part of this project produced (issue 14).

    python -m benchmarks.quality --suite quick|standard|full [--variants ...] [--out DIR]
    python -m benchmarks.quality --render DIR/NAME.json     # tables again, from saved results

Two measurements, both one pass over a stream:

* :mod:`.synthetic`: documents drawn from a topic-word matrix that tomotopy's collapsed Gibbs
  LDA fitted to a real corpus (:mod:`.truths`), with Dirichlet(alpha) mixtures and the corpus's
  own document lengths (:mod:`.streams`); matched L1 per topic at document checkpoints.
* :mod:`.real`: real text, train split streamed, test split judged (NPMI, uniqueness, held-out
  log-likelihood, top words shared between topics).

Corpora are read and filtered as a user would (:mod:`.corpora`); systems are our model under
named settings (:mod:`.variants`) and the peers of :mod:`benchmarks.peers` (:mod:`.systems`).
Results go to ``DIR/NAME.json`` and ``DIR/NAME.md`` (:mod:`.report`; ``DIR`` defaults to the
git-ignored ``.artifacts/quality/``), rewritten after every system; ``guard.json`` holds the CI
bounds of ``tests/test_quality_guard.py``.
"""
