"""The LLM layer: the provider protocol, one file per provider, retries, budget, prices and batch APIs."""
