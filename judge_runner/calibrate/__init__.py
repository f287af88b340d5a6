"""``judge-runner calibrate``: measure a judge against human qrels, with position, injection and length probes.

Modules, each small and built from pure functions where it can be:

- :mod:`.data` reads a test collection (a BEIR folder, or qrels + queries + corpus files) and samples queries;
- :mod:`.pool` runs the systems (the built-in search's configurations, degraded controls, TREC runs) and pools
  their top-k with every qrels-judged document;
- :mod:`.labeling` is the labelling protocol (:class:`~.labeling.Labeler`) with adapters for today's judges;
- :mod:`.collect` labels the pool in the chosen modes and trials;
- :mod:`.stats` computes agreement, system-ranking and per-query figures with query-bootstrap intervals;
- :mod:`.probes` runs the position, injection and length probes;
- :mod:`.verdicts` turns figures into pass / warn / fail / inconclusive against documented thresholds, once each
  check has its minimum of evidence (else insufficient);
- :mod:`.output` writes and finds calibration files and prints the console table;
- :mod:`.run` ties them together for the command.
"""
