"""What the long-running commands expose to operators: Prometheus metrics, health and readiness."""
