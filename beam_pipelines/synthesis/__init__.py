"""Reasoning synthesis: a teacher writes the reasoning that goes before each SFT target's real observation.

The stage itself is `beam_pipelines.stages.synthesis`; this package holds its parts: the settings
(`settings`), the teachers it asks (`teacher`), the reply cache that makes a rerun free (`cache`) and
the choice of the reasoning to keep (`selection`).
"""
