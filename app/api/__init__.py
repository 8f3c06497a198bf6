"""What the scheduler, the webhooks and the agent share: Koordinator's names and rules, and edge models.

As upstream keeps them in ``apis/extension`` and ``apis/<group>/v1alpha1``:

- :mod:`~app.api.koordext`: labels, annotations, QoS and priority classes and their resolution,
  batch/mid resource names; :mod:`~app.api.kubeqos`: the Kubernetes QoS class of a pod spec.
- :mod:`~app.api.elasticquota`: ElasticQuota's names and the one parse of an ElasticQuota object.
- :mod:`~app.api.quantity`, :mod:`~app.api.timeparse`, :mod:`~app.api.labelselector`: Kubernetes
  quantities, times and label selectors; :mod:`~app.api.kinds`: the kinds' groups and paths;
  :mod:`~app.api.manifests`: the cluster objects of YAML/JSON manifest files.
- pydantic models where objects are validated at an edge: :mod:`~app.api.extender` (the extender
  request bodies), :mod:`~app.api.slo` (NodeMetric, the NodeSLO spec; with :mod:`~app.api.meta`
  and :mod:`~app.api.scheduling`'s DeviceInfo).

Layer: the bottom; imports no other part of the project.
"""
