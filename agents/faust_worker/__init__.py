"""The Kafka runtime: the agents hosted by Faust workers, and publishing manifests to Kafka."""

# Records per admission partition between two snapshots (here, so that the command line can
# name the default without importing the Kafka clients).
DEFAULT_SNAPSHOT_EVERY = 2000
