"""Admission webhooks (ClusterColocationProfile, ElasticQuota, pod QoS rules). Arrive with their issue."""
