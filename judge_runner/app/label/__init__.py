"""The labelling page of ``judge-runner label``: the job (``server.py``), the loopback server (``web.py``), the
page (``page.py``) and the import into the judgment cache (``cache.py``). What a person grades, and what
the grades estimate, lives in :mod:`judge_runner.human`."""
