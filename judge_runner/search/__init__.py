"""The search under test: backend contract, SQLite and PostgreSQL backends, RRF fusion, external systems;
the embedder it is given comes from :mod:`judge_runner.embed`."""
