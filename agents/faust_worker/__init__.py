"""The Kafka runtime: the agents hosted by Faust workers, and publishing manifests to Kafka."""
