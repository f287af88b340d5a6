"""The judge protocol: what the judge sees, its requests and replies, labels through the cache and trials,
scores from labels, the LLM and offline judges, and qrels in and out.
"""
