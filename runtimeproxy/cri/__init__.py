"""The CRI as koord runtime-proxy decodes it (vendored from kubernetes/cri-api)."""
