"""ElasticQuota (upstream pkg/scheduler/plugins/elasticquota)."""
