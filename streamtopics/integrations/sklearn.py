"""The streaming anchor-word topic model as a scikit-learn estimator: ``streamtopics.integrations.sklearn``.

:class:`StreamingTopicsEstimator` follows scikit-learn's conventions (the parameters are the
constructor's arguments, stored as given; ``fit``/``partial_fit`` learn; ``transform`` gives the
documents' topic mixtures; fitted attributes end in ``_``) without importing scikit-learn: it is
not a dependency of streamtopics, so the class implements ``get_params``/``set_params`` itself and
imports scikit-learn only inside ``__sklearn_tags__`` (which only scikit-learn calls) and to
raise its ``NotFittedError`` where it is installed. Like :mod:`streamtopics.integrations.river`, the module
shares its name with the package it serves; absolute imports find the installed ``sklearn``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import scipy.sparse as sp

from ..config import ModelConfig
from ..model import StreamingTopicModel

__all__ = ["StreamingTopicsEstimator"]


class StreamingTopicsEstimator:
    """Anchor-word topic model on a document-term matrix, learned in one pass or in mini-batches.

    ``X`` is a document-term matrix of counts (a scipy sparse matrix or a dense array,
    documents x words, e.g. from ``CountVectorizer``). ``fit`` learns the co-occurrence sums of
    ``X`` and computes the topics; ``partial_fit`` adds a mini-batch to the sums and recomputes
    the topics from everything seen so far, keeping topic ids stable
    (:class:`~streamtopics.StreamingTopicModel`); ``transform`` gives each document's topic
    mixture (rows sum to 1; a document with no counts gets the topic prevalences).

    Parameters
    ----------
    n_components
        Number of topics K. Each topic has an anchor word of its own, so X with fewer features
        gets one topic per feature, with a warning (as ``SelectKBest`` keeps every feature when
        ``k`` exceeds them): ``n_components_`` is the number fitted.
    vocabulary
        The words of ``X``'s columns (e.g. ``CountVectorizer().get_feature_names_out()``): they
        name the topics' words (``model_.topic_info()``). None: ``"w0"``, ``"w1"``, ...
    anchor_min_df
        Documents a word must occur in to be a candidate anchor (``"auto"``: grows with the
        stream, as in :class:`~streamtopics.StreamingTopicModel`).
    refine_iterations, reservoir_size, background_topic
        As in :class:`~streamtopics.StreamingTopicModel`.
    random_state
        Seed of the model (an int; None: 0).

    Attributes
    ----------
    components_
        K x V: row k is topic k's word distribution (rows sum to 1), in ``topic_ids_`` order.
    n_components_
        Number of topics fitted: ``min(n_components, n_features_in_)``.
    topic_ids_
        The stable id of each topic (row of ``components_``, column of ``transform``'s output).
    n_features_in_
        Number of words (columns of ``X``).
    model_
        The fitted :class:`~streamtopics.StreamingTopicModel` (``model_.topic_info()``,
        ``model_.snapshot``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3, 2, 0, 0], [0, 0, 2, 3]] * 20)
    >>> estimator = StreamingTopicsEstimator(n_components=2, vocabulary=["apple", "pear", "goal", "match"])
    >>> mixtures = estimator.fit_transform(X)
    >>> mixtures.shape, estimator.components_.shape
    ((40, 2), (2, 4))
    >>> bool(mixtures[0].argmax() != mixtures[1].argmax())
    True
    >>> estimator.get_params()["n_components"]
    2
    """

    def __init__(self, n_components: int = 10, *, vocabulary=None, anchor_min_df=1,
                 refine_iterations: int = ModelConfig.refine_iterations, reservoir_size: int = ModelConfig.reservoir_size,
                 background_topic: bool = ModelConfig.background_topic, random_state: int | None = None):
        self.n_components = n_components
        self.vocabulary = vocabulary
        self.anchor_min_df = anchor_min_df
        self.refine_iterations = refine_iterations
        self.reservoir_size = reservoir_size
        self.background_topic = background_topic
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _get_param_names(cls) -> list[str]:
        return sorted(name for name in inspect.signature(cls.__init__).parameters if name != "self")

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments, as set (scikit-learn's ``get_params``)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params) -> "StreamingTopicsEstimator":
        """Set constructor arguments; takes effect at the next ``fit``."""
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid parameters: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()}
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v is not defaults[k]
                            and not (np.isscalar(v) and v == defaults[k]))
        return f"{type(self).__name__}({changed})"

    def __sklearn_tags__(self):
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(), input_tags=InputTags(sparse=True, positive_only=True))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    # ------------------------------------------------------------------ learning
    def fit(self, X, y=None) -> "StreamingTopicsEstimator":
        """Learn the topics of ``X`` from scratch (``y`` is ignored)."""
        for name in ("model_", "components_", "topic_ids_", "n_features_in_", "n_components_"):
            self.__dict__.pop(name, None)
        return self.partial_fit(X)

    def partial_fit(self, X, y=None) -> "StreamingTopicsEstimator":
        """Add the documents of ``X`` to what was learned and recompute the topics."""
        first = not hasattr(self, "model_")
        matrix = self._validate(X, reset=first)
        if first:
            self.model_ = self._new_model(matrix.shape[1])
            self.n_components_ = self.model_.config.n_topics
        self.model_.learn_many(matrix)
        if self.model_.statistics().n_docs == 0:
            raise ValueError(f"no document of X ({matrix.shape[0]} sample(s), {matrix.shape[1]} feature(s)) has 2 "
                             "or more tokens: there is nothing to learn topics from")
        snapshot = self.model_.refresh()
        self.components_ = np.ascontiguousarray(snapshot.topic_word.T)
        self.topic_ids_ = np.asarray(snapshot.topic_ids)
        return self

    def _new_model(self, n_features: int) -> StreamingTopicModel:
        k = self.n_components
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"n_components must be a positive int, got {k!r}")
        if k > n_features:
            warnings.warn(f"n_components={k} is greater than n_features={n_features}: each topic needs an anchor "
                          f"word of its own, so {n_features} topics are fitted (n_components_)", UserWarning,
                          stacklevel=4)
            k = n_features
        words = [f"w{i}" for i in range(n_features)] if self.vocabulary is None else [str(w) for w in self.vocabulary]
        if len(words) != n_features:
            raise ValueError(f"vocabulary has {len(words)} words, X has {n_features} feature(s)")
        return StreamingTopicModel(int(k), vocabulary=words, anchor_min_df=self.anchor_min_df,
                                   refine_iterations=self.refine_iterations, reservoir_size=self.reservoir_size,
                                   background_topic=self.background_topic,
                                   seed=0 if self.random_state is None else int(self.random_state))

    # ------------------------------------------------------------------ inference
    def transform(self, X) -> np.ndarray:
        """Topic mixtures of the documents of ``X`` (documents x K, columns in ``topic_ids_`` order)."""
        if not hasattr(self, "model_"):
            raise _not_fitted(f"this {type(self).__name__} is not fitted yet: call fit or partial_fit first")
        return self.model_.infer(self._validate(X, reset=False))

    def fit_transform(self, X, y=None) -> np.ndarray:
        return self.fit(X).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """The names of ``transform``'s columns: ``topic_<id>``."""
        if not hasattr(self, "model_"):
            raise _not_fitted(f"this {type(self).__name__} is not fitted yet: call fit or partial_fit first")
        return np.asarray([f"topic_{t}" for t in self.topic_ids_], dtype=object)

    def _validate(self, X, reset: bool) -> sp.csr_matrix:
        """``X`` as a CSR matrix of float64 counts, checked as scikit-learn checks input."""
        if sp.issparse(X):
            if X.dtype.kind == "c":
                raise ValueError("Complex data not supported: X holds counts")
            matrix = sp.csr_matrix(X, dtype=np.float64)
            values = matrix.data
        else:
            if hasattr(X, "to_numpy"):
                X = X.to_numpy()
            dense = np.asarray(X)
            if dense.dtype.kind == "c":
                raise ValueError("Complex data not supported: X holds counts")
            if dense.dtype.kind in "OUS":
                dense = np.asarray(dense.tolist() if dense.dtype.kind == "O" else dense, dtype=np.float64)
            dense = dense.astype(np.float64, copy=False)
            if dense.ndim != 2:
                raise ValueError(f"Expected a 2D array (documents x words), got {dense.ndim}D. "
                                 "Reshape your data: X.reshape(1, -1) for a single document")
            matrix, values = sp.csr_matrix(dense), dense
        n_samples, n_features = matrix.shape
        if n_samples < 1:
            raise ValueError(f"Found array with 0 sample(s) (shape={matrix.shape}) while a minimum of 1 is required.")
        if n_features < 1:
            raise ValueError(f"Found array with 0 feature(s) (shape={matrix.shape}) while a minimum of 1 is required.")
        if not np.all(np.isfinite(values)):
            raise ValueError("Input X contains NaN or infinity: counts must be finite")
        if np.any(values < 0):
            raise ValueError(f"Negative values in data passed to {type(self).__name__}: X holds counts")
        if reset:
            self.n_features_in_ = n_features
        elif n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        return matrix


def _not_fitted(message: str) -> Exception:
    """scikit-learn's NotFittedError where it is installed (it is a ValueError and an AttributeError)."""
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:
        return AttributeError(message)
    return NotFittedError(message)
