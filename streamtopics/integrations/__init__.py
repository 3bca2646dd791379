"""The model in other libraries' terms: a river transformer (``river``), a scikit-learn estimator
(``sklearn``) and pandas DataFrames of topics and mixtures (``frames``)."""
