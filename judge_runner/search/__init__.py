"""The search under test: backend contract, SQLite backend, RRF fusion, embeddings."""
