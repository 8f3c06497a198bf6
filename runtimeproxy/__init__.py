"""koord runtime-proxy (upstream koord-runtime-proxy): a CRI v1 middleware between kubelet and containerd.

It serves the CRI on ``--koord-runtimeproxy-endpoint``, forwards every RuntimeService and ImageService call to
``--remote-runtime-service-endpoint`` as raw bytes (:mod:`runtimeproxy.server`), and around six calls asks the
runtime hook servers (``koord agent``'s RuntimeHookService, :mod:`runtimeproxy.dispatcher`) and merges their
answer into the request (:mod:`runtimeproxy.resexecutor`). See docs/runtime-proxy.md.
"""
