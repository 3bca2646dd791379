"""Documents in: tokenizing (``tokenizer``, ``mail``, ``batch_encoder``), the vocabulary (``vocabulary``,
``open_vocabulary``) and documents as word ids and counts, with the reasons one is rejected
(``documents``)."""
