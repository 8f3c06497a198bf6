"""``runtime.v1alpha1``: RuntimeHookService, vendored from koordinator-sh/koordinator
``apis/runtime/v1alpha1/api.proto`` with its generated modules (hack/genproto.py)."""
