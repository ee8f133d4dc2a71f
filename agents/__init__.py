"""The agents (ingest, admission, applier), their two runtimes and the command line."""
