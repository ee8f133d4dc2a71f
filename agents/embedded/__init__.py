"""The embedded runtime: the agents in one process over a local file log, no broker."""
