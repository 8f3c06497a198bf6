"""The FastAPI application: extender verbs, inspection API, health and metrics."""
