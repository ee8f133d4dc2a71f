"""MultiKueue: the manager's dispatch of Workloads to worker clusters, decided from the log."""
