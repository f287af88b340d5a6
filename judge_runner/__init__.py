"""judge-runner: tells a team how good their search is, every week, without hand grading.

Phase one (``generate``) has an LLM agent write a query set from a knowledge base; phase two
(``evaluate``) runs each query through the search under test and has an LLM judge grade the results.
The public Python API is :mod:`judge_runner.api` (this module imports nothing of the package).
"""

__version__ = "0.1.0"
