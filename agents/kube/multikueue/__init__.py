"""MultiKueue on the cluster side: worker connections, their watches, and the executor of decisions."""
