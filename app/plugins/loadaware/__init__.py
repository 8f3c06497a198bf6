"""LoadAwareScheduling: filter and score nodes by real usage reported in NodeMetric.

Follows pkg/scheduler/plugins/loadaware of koordinator-sh/koordinator.
"""
