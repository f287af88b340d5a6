"""Run defaults for a local OpenAI-compatible server: one request at a time unless the user asked for
more. Such servers queue requests and keep generating after a client timed out, so concurrency and
retried timeouts only lengthen the wait. See docs/providers.md.
"""

from __future__ import annotations

from typing import Any

from judge_runner.llm.wire import is_local_url

LOCAL_CONCURRENCY = 1


def local_server_setup(base_url: str | None, concurrency: int, concurrency_set: bool, timeout_s: float) -> tuple[int, list[str]]:
    """``(concurrency to use, notes for stderr)``; a remote server keeps ``concurrency``. ``timeout_s`` in
    seconds."""
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
    """Share what the two providers learn of their one server (a feature it refused), when it is local or
    the model is the same."""
    if generator is None or generator is judge or not hasattr(judge, "capabilities") or not hasattr(generator, "capabilities"):
        return
    if generator.base_url == judge.base_url and (judge.local or generator.model == judge.model):
        generator.capabilities = judge.capabilities
