"""The search under test: the backend contract, the SQLite and PostgreSQL backends, external systems, and
what the judge is shown of a document."""
