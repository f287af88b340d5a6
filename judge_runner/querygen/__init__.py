"""Phase one: the ``QueryWriter`` protocol, the exploring LLM agent with its sandboxed file tools, the
heuristic writer, and the checks every written query set goes through.
"""
