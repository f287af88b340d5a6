"""The jobs judge-runner runs, each assembled from the layers below: the main job, ``weekly``, resume,
``rejudge``, ``--dry-run``, indexing, search, history, calibrate, label, and the role factory. The CLI
calls these; a Python user can too.
"""
