"""The jobs judge-runner runs, each assembled from the layers below: the main job, ``weekly``, resume,
the role factory (which judge and query writer a run gets), ``--dry-run``, indexing and search commands,
history, calibrate, and the crash log. The CLI calls these; a Python user can too.
"""
