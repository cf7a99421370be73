"""`rag serve`: one resident process that keeps the models, the index and the KV cache
loaded, and the small client that `rag ask`, `rag search` and `rag chat` use to reach it.

:mod:`.locate` and :mod:`.client` use the standard library only (a client process must
start in tens of milliseconds); :mod:`.service` and :mod:`.app` are the server side.
"""
