"""Vectors: the facts' embeddings and the index that searches them, derived from the store.

* :mod:`.embedders` — text to L2-normalised vectors (the local model, OpenAI-compatible, hash);
  :mod:`.cache` keeps them by text so nothing is embedded twice.
* :mod:`.index` — the LanceDB table (a directory or object storage), searched in memory by
  :mod:`.mirror` (exact), :mod:`.projection`, :mod:`.topk` and :mod:`.inverted` (faiss).
* :mod:`.outbox` — the store's outbox drained into the index, checked, replayed and rebuilt.
"""
