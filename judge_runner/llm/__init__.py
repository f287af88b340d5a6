"""The LLM layer: one small provider protocol, one file per provider, one retry policy, budget and prices."""
