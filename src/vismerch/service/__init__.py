"""The service layer: what the CLI, the HTTP routes and the Python API call.

Each module takes an open ``Workspace`` (store connection per thread, settings, cached
indexes) and returns typed results (``service.models``); errors are the typed family in
``vismerch.errors`` (NotFound, Conflict, Stale, Busy, UsageError) that the HTTP layer maps
to status codes. Built so far: catalog, search, duplicates, quality.
"""
