"""Reading the runs already written: the trend over time (``trend``, ``trend_render``) and the weekly
report (``report``, ``compare_report``).
"""
