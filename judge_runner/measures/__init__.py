"""Measures that need no judge-runner object: IR metrics per query (ir-measures), agreement between
trials (Krippendorff's alpha) and the paired bootstrap that tells a change from noise.
"""
