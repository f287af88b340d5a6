"""Run defaults for a local OpenAI-compatible server (Ollama, vLLM, llama.cpp on loopback or a private
address): one request at a time unless the user asked for more, and plain words about timeouts.

Why: llama.cpp's servers (``llama-server``, llama-cpp-python) and Ollama serve a small number of
requests at once (llama-cpp-python: one) and queue the rest, and a request keeps being generated after
its client timed out. So ``--timeout`` counts the wait in the queue, concurrent judge calls only
lengthen that wait, and a retried timeout queues behind its own abandoned generation (issue 13: one run
took 30 minutes to fail with the old defaults of concurrency 5 and retried timeouts).
"""

from __future__ import annotations

from typing import Any

from judge_runner.llm.wire import is_local_url

LOCAL_CONCURRENCY = 1


def local_server_setup(base_url: str | None, concurrency: int, concurrency_set: bool, timeout_s: float) -> tuple[int, list[str]]:
    """``(concurrency to use, notes for stderr)`` for a run against ``base_url``.

    ``concurrency``: the configured value; ``concurrency_set``: whether the user set it (flag,
    environment or config file) rather than leaving the default; ``timeout_s``: ``--timeout`` in seconds.
    A remote server keeps ``concurrency`` and gets no note."""
    if not is_local_url(base_url):
        return concurrency, []
    notes = [
        (
            f"note: {base_url} is a local server: --timeout {timeout_s:g} s counts the time a request waits in its "
            f"queue as well as its generation, and a timed-out request is not retried (the server may still be "
            f"generating it, and a retry would queue behind it)"
        )
    ]
    if not concurrency_set:
        notes.append(
            f"note: concurrency {LOCAL_CONCURRENCY} for a local server (most serve one request at a time); set --concurrency to change it"
        )
        return LOCAL_CONCURRENCY, notes
    if concurrency > LOCAL_CONCURRENCY:
        notes.append(
            f"note: --concurrency {concurrency} against a local server: requests beyond its parallel slots wait "
            f"in its queue, and that wait counts against --timeout"
        )
    return concurrency, notes


def share_server(generator: Any, judge: Any) -> None:
    """Let the generator use what the judge's provider learns about their server (and the reverse):
    both talk to one server, so a feature it refused once is not tried again by the other. Shared when
    the server is local (the model name does not change what it accepts) or the model is the same;
    a no-op for providers without ``capabilities``."""
    if generator is None or generator is judge or not hasattr(judge, "capabilities") or not hasattr(generator, "capabilities"):
        return
    if generator.base_url == judge.base_url and (judge.local or generator.model == judge.model):
        generator.capabilities = judge.capabilities
