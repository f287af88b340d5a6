"""Running a test's body in a fresh Python process (:func:`run_isolated`), for tests that send signals to their
own process: whatever goes wrong with the signal there (a handler left behind, a delivery that comes late)
ends that process, which the test reports with its exit code and stderr, never the test runner's worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_isolated(target: str, *args: str, timeout_s: float = 60.0) -> None:
    """Call ``target`` (``"package.module:function"``) with the strings ``args`` (paths a test's fixtures made,
    say) in a new interpreter with the repository first on ``sys.path`` and this process's environment.
    Raises AssertionError naming its exit code (a negative one: the signal that ended it) and the end of its
    stderr when the function raised or the process died; ``subprocess.TimeoutExpired`` after ``timeout_s``."""
    module, function = target.split(":")
    code = f"import importlib; getattr(importlib.import_module({module!r}), {function!r})(*{list(args)!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    assert done.returncode == 0, f"{target} ended with exit code {done.returncode}: {done.stderr[-3000:]}"
