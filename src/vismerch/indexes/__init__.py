"""vismerch.indexes: the indexes that answer search without a pass over the catalog.

``vector`` (FAISS over vectors with string ids), ``stored`` (a store's "more like this"
index), ``palette`` (palette colours in CIELAB cells, for colour search) and ``catalog``
(the search bundle ingest persists: titles, palettes, category and stock per product).
The Python API's ``vismerch.search`` function lives in ``vismerch.api``.
"""
