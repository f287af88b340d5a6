"""People's grades (assessors, in TREC's word), as against the judge's labels: what to grade
(``plan.py``), a budget's question, units and draw (``budget.py``), its estimate (``estimate.py``), the
session's journal (``journal.py``), one writer per set (``lock.py``), the assessor's pace and what a budget
buys (``pace.py``) and the sampling options (``options.py``)."""
