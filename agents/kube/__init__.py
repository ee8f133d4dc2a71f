"""The Kubernetes connector: a client for a real API server, the watcher and the applier."""
