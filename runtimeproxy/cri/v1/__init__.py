"""CRI ``runtime.v1`` (kubernetes/cri-api v0.36.3 ``pkg/apis/runtime/v1/api.proto``) and its generated modules
(hack/genproto.py)."""
