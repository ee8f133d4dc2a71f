"""Kueuestream: a Kueue-compatible quota and admission control plane, as an event-sourced pipeline.

The code lives in the repository's top-level folders, each a sub-package here:
``kueuestream.admission`` (the pure core), ``kueuestream.streams`` (the log)
and ``kueuestream.agents`` (the agents, their runtimes and the command line).
"""
