"""Side-by-side evaluation against the topic models our users would pick instead (issue 9).

    python -m benchmarks.peers --suite quick|full [--out DIR]

Every system gets the same stream of documents, in arrival order, once, in chunks of
``STREAM_CHUNK`` documents, through the same tiny interface (:class:`benchmarks.peers.base.Peer`):

* ``learn(chunk)``: absorb the next chunk of the stream (a scipy CSR matrix, documents x vocabulary);
* ``finish()``: whatever the system does before its topics can be read (our refresh; tomotopy's
  batch Gibbs sampling over everything it was given);
* ``topic_word()``: V x K, columns summing to 1;
* ``infer(csr)``: M x K topic mixtures of unseen documents, by the system's own inference.

Adapters, one module each, say in their docstrings how and with which parameters each library is
used (its documented recommendation for online training): :mod:`.ours`, :mod:`.river_lda`,
:mod:`.gensim_lda`, :mod:`.sklearn_lda`, :mod:`.tomotopy_lda`. Each system runs in a fresh
subprocess (:mod:`.worker`) so that its peak resident memory is its own.
"""

STREAM_CHUNK = 2000
SYSTEMS = ("ours", "gensim", "sklearn", "river", "tomotopy")
