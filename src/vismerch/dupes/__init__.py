"""Near-duplicate detection: per-image signatures (``signature``), candidate pairs
(``candidates``, ``hashsearch``), their confirmation (``confirm``, ``match``,
``colourcheck``), groups (``groups``), the incremental search (``state``, ``refresh``)
and merchandisers' decisions (``reviews``). Why: docs/decisions/0007."""
