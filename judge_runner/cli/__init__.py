"""The ``judge-runner`` command line: thin commands that parse options and call one library function,
one module per group of commands; :mod:`.app` holds the click group and turns failures into exit codes.
"""

from judge_runner.cli.app import entry, main

__all__ = ["entry", "main"]
