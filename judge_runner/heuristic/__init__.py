"""The heuristic roles of the ``offline`` provider: a query writer that mines the corpus
(:mod:`.writer`) and a judge that scores by embedding similarity and term overlap (:mod:`.judge`).

Deterministic stand-ins for an LLM, so judge-runner runs with no API key; labelled as heuristic wherever
their results appear. They live outside ``llm/`` because they read the corpus and use embeddings,
which the LLM layer never touches.
"""

from judge_runner.llm.registry import PROVIDERS

MODEL_NAME = PROVIDERS["offline"].default_model  # "offline-heuristic-v1", recorded as the judge model
