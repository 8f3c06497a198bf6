"""Koordinator's runtime hook API (upstream ``apis/runtime``): the vendored proto, its generated modules and
the hook server registration format."""
