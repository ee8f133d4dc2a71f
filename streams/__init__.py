"""The log layer: record schemas, canonical encoding, topics and the log backends.

``streams`` sits between the pure admission core (``admission``), which it may
import, and the agents, which it must not. See ``docs/design.md``.
"""
