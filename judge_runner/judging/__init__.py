"""The judge protocol: what the judge sees of a result (``fence``), the requests (``requests``), the
``Judge`` protocol and its replies (``protocol``), the labelling orchestration with its cache and trials
(``labelling``, ``cache``), the scores computed from labels (``scores``), the judge fingerprint, the LLM
and heuristic judges, and qrels in and out.
"""
