"""The run file: its line types (``lines``), the one reader (``read``), the writer (``write``) and the
summary line built from the lines (``summary``).
"""
