"""The ground floor: plain data passed between stages (models), failures and exit codes, the printer,
shipped resources (prompts, schemas), text helpers and secret redaction. Imports nothing of judge-runner
above it.
"""
