"""``judge-runner calibrate``: measure a judge against human qrels, with position, injection and length probes
(docs/calibration.md). :mod:`.data` reads a test collection, :mod:`.pool` runs the systems and pools their
results, :mod:`.collect` labels the pool, :mod:`.stats` computes the figures, :mod:`.verdicts` judges them
against documented thresholds, :mod:`.output` writes the file, :mod:`.run` ties them together."""
