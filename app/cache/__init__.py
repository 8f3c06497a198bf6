"""The in-memory snapshot of the cluster and the parsed forms of its objects."""
