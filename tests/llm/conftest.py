"""Fixtures of the batch-mode tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def run_folder(db_copy, tmp_path) -> Path:
    """An empty run folder whose parent holds ``db.sqlite``, a link to a private copy of the fixtures index
    (where a resumed run looks for the index: ``--db run.parent.parent / "db.sqlite"``)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    (tmp_path / "db.sqlite").symlink_to(db_copy)
    return folder
