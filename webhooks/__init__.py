"""Admission webhooks (ClusterColocationProfile, ElasticQuota, pod QoS rules), mounted into the app on 9876.

:mod:`webhooks.webhook` defines what a webhook is and the
:class:`~webhooks.webhook.WebhookContext` the app builds for them; :mod:`webhooks.pod` and
:mod:`webhooks.elasticquota` list theirs; :mod:`webhooks.registry` gathers them.

Layer: below :mod:`app.server`, above :mod:`app.plugins`; shared rules come from :mod:`app.api`
(the ElasticQuota checks reuse the ElasticQuota plugin's quota tree and ResourceList arithmetic).
"""
