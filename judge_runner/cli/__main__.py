"""``python -m judge_runner.cli``: the same as the ``judge-runner`` console script."""

from judge_runner.cli.app import entry

entry()
