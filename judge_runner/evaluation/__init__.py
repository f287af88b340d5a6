"""Phase two: the run loop (search each query, judge it, write its line the moment it is judged) and
compare runs of several search systems on one query set.
"""
