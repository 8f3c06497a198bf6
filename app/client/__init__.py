"""The one Kubernetes API client: configuration loading, requests and a typed error tree.

Every API call of the service, the manager and the agent goes through this package; callers
catch the classes of :mod:`app.client.errors` instead of comparing status codes.

Layer: below :mod:`app.sources`; may import :mod:`app.api` only.
"""
