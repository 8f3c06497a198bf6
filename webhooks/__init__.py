"""Admission webhooks (ClusterColocationProfile, ElasticQuota, pod QoS rules), mounted into the app on 9876."""
