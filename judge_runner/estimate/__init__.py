"""What a run would send and cost before it spends: the judge calls, their tokens and prices
(``costs``), and the ``--dry-run`` report (``report``).
"""
