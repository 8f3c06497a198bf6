"""Shared builders for the ElasticQuota tests."""
