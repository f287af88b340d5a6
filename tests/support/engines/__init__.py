"""Real external search engines wrapped for tests: bm25s as a command and as a loopback HTTP service."""
