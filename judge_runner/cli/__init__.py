"""The ``judge-runner`` command line: thin commands that parse options and call one library function.

- :mod:`.options`: click options shared by several commands; settings and printer from them.
- :mod:`.indexing`: ``index``, ``search``.
- :mod:`.evaluation`: ``generate``, ``evaluate``, ``generate-and-evaluate``, ``rejudge``.
- :mod:`.history`: ``trend``, ``baseline set``, ``report``.
- :mod:`.weekly`: ``weekly``.
- :mod:`.label`: ``label`` (the labelling page); :mod:`.calibrate`: ``calibrate``.
- :mod:`.app`: the click group ``main`` and the console script ``entry``, where failures become exit codes.
"""

from judge_runner.cli.app import entry, main

__all__ = ["entry", "main"]
