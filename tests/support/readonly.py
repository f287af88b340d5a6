"""Running a command with some files or folders read-only, as a user without write permission meets them.

As an ordinary user, ``chmod`` makes a path read-only (and is undone afterwards). As root (containers, CI),
permission bits do not stop a write, so the paths are bind-mounted read-only over themselves in a private
mount namespace (``unshare -rm``, gone when the command ends): SQLite then meets EROFS where the user met
EACCES, the same failure for the code under test. Where neither works, :data:`readonly_paths` skips the test,
saying why.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _can_bind_readonly() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "-rm", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,ro,bind /tmp /tmp"], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


AS_ROOT = os.geteuid() == 0
readonly_paths = pytest.mark.skipif(
    AS_ROOT and not _can_bind_readonly(), reason="running as root and cannot bind-mount read-only in a user namespace (unshare -rm)"
)


def run_readonly(
    paths: list[Path], args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``judge-runner ARGS`` in a subprocess with every path of ``paths`` (files or folders) read-only; returns
    the finished process (text output). Permissions changed by ``chmod`` are restored afterwards."""
    full = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "judge_runner.cli", *args]
    if AS_ROOT:
        mounts = " && ".join(
            f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))} && mount -o remount,ro,bind {shlex.quote(str(p))}" for p in paths
        )
        script = f"{mounts} && exec {shlex.join(command)}"
        return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=full, cwd=cwd, timeout=300)
    modes = {p: p.stat().st_mode for p in paths}
    try:
        for p in paths:
            p.chmod(stat.S_IMODE(modes[p]) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        return subprocess.run(command, capture_output=True, text=True, env=full, cwd=cwd, timeout=300)
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))
