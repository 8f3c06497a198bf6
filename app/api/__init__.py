"""Wire and API models: the kube-scheduler extender v1 protocol and Koordinator's kinds."""
