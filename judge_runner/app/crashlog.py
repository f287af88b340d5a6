"""Unexpected errors (bugs): the traceback written to a log, with secrets kept out of it and of the line
shown. A non-:class:`~judge_runner.core.failures.JudgeRunnerError` exits 4 with one line on stderr; the
traceback goes to :data:`ERROR_LOG` (else the temp folder), and to stderr too with ``--debug`` or
``JUDGE_RUNNER_DEBUG=1``. Everything written or shown passes :func:`scrub`.
"""

from __future__ import annotations

import os
import re
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from judge_runner import __version__
from judge_runner.core.failures import InternalError, one_line
from judge_runner.search.redact import scrub_secrets

ERROR_LOG = Path(".judge-runner") / "errors.log"
FALLBACK_NAME = "judge-runner-errors.log"
MAX_LOG_BYTES = 1_000_000  # a larger log is moved to errors.log.1 (one old generation kept)
DEBUG_ENV = "JUDGE_RUNNER_DEBUG"

# Environment variables whose values are secrets: API keys, tokens, passwords, connection strings.
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|DSN|DATABASE_URL)$", re.IGNORECASE)
# Secrets in text whatever their source: a URL's password (up to the authority's last @), a libpq
# password= parameter, an OpenAI/Anthropic-style key.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^\s/]+@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|[^\s&]+)", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")


def debug_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``JUDGE_RUNNER_DEBUG`` is 1, true, yes or on (any case)."""
    value = (os.environ if environ is None else environ).get(DEBUG_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def scrub(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with secrets as ``***``: the value (6 characters or more) of every environment variable named
    ``*KEY``, ``*TOKEN``, ``*SECRET``, ``*PASSWORD``, ``*CREDENTIALS``, ``*DSN`` or ``DATABASE_URL`` (and a
    DSN's password alone); any URL's password; libpq ``password=`` values; ``sk-...`` keys."""
    environ = os.environ if environ is None else environ
    for name, value in environ.items():
        if value and len(value) >= 6 and _SECRET_NAME.search(name):
            text = text.replace(value, "***")
            if "://" in value or "password" in value.lower():
                text = scrub_secrets(text, value)
    text = _URL_PASSWORD.sub(r"\1***@", text)
    text = _KV_PASSWORD.sub(r"\1***", text)
    return _KEY_LIKE.sub("***", text)


def traceback_text(exc: BaseException) -> str:
    """The scrubbed traceback of ``exc``, chained causes included."""
    return scrub("".join(traceback.format_exception(exc)))


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.stat().st_size > MAX_LOG_BYTES:
        path.replace(path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the log is the user's alone
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as log:
        os.fchmod(log.fileno(), 0o600)
        log.write(text)


def log_traceback(exc: BaseException, argv: Sequence[str] = ()) -> Path | None:
    """Append a header (UTC time, version, scrubbed ``argv``) and the scrubbed traceback to :data:`ERROR_LOG`,
    else the temp folder's ``judge-runner-errors.log``. Returns the path written, or None."""
    header = (
        f"=== {datetime.now(UTC).isoformat(timespec='seconds')} judge-runner {__version__}: "
        f"{scrub(' '.join(['judge-runner', *argv]))} ===\n"
    )
    for path in (ERROR_LOG, Path(tempfile.gettempdir()) / FALLBACK_NAME):
        try:
            _append(path, header + traceback_text(exc) + "\n")
            return path
        except OSError:
            continue
    return None


def internal_error(exc: BaseException, logged_in: Path | None) -> InternalError:
    """The :class:`~judge_runner.core.failures.InternalError` for ``exc``, with a scrubbed one-line message."""
    return InternalError(scrub(one_line(exc)), exc, logged_in)
