"""The labelling page of ``judge-runner label``: people label a run's results on a loopback page into a
human qrels set (docs/calibration.md, "On your own corpus: label, then calibrate").

- ``server.py``: the job (the set's locks, the session, the server, the closing line);
- ``options.py``: the sampling options (``Sampling``), checked for a new session and for a resumed one;
- ``budget.py``: ``--budget``: the pace, what a budget buys, its draw and estimate;
- ``lock.py``: one writer per set (a flock naming its holder);
- ``session.py``: the fsynced journal, the qrels it makes, undo per tab, labels flagged fast;
- ``cache.py``: the import into the judgment cache, from a thread of its own;
- ``web.py``: the loopback server (host names, origin, strict request checks);
- ``page.py``: the page.
"""
