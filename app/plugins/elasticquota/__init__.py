"""ElasticQuota (upstream pkg/scheduler/plugins/elasticquota): quota tree, runtime fair share,
quota-aware PreFilter and preemption, over-use revoke, REST views."""

from app.plugins.elasticquota.args import ElasticQuotaArgs, decode_args
from app.plugins.elasticquota.calculator import RuntimeCalculator, water_fill
from app.plugins.elasticquota.manager import QuotaManager
from app.plugins.elasticquota.plugin import ElasticQuota, new_elastic_quota

__all__ = [
    "ElasticQuota",
    "ElasticQuotaArgs",
    "QuotaManager",
    "RuntimeCalculator",
    "decode_args",
    "new_elastic_quota",
    "water_fill",
]
