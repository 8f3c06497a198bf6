"""Where the API server is and how to authenticate to it: kubeconfig or the in-cluster service account.

The ``kubernetes`` package's loaders (``kubernetes.config.load_kube_config`` /
``load_incluster_config``) resolve contexts, ``exec`` credential plugins, tokens, client certificates
and the service-account files into a :class:`kubernetes.client.Configuration`, as ``kubectl`` and
client-go's ``clientcmd`` / ``rest.InClusterConfig`` do. :func:`connection_settings` derives from it
what httpx needs: the base URL, one :class:`ssl.SSLContext` (CA, client certificate and key,
hostname checking), the proxy, the TLS server name, and an :class:`httpx.Auth` that asks the
configuration for the ``Authorization`` header on every request, so the loaders' refresh hooks
keep rotating tokens (the in-cluster token file is re-read every minute; an expired ``exec``
credential runs the plugin again).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Generator
from dataclasses import dataclass

import httpx
import kubernetes.client
import kubernetes.config
from kubernetes.config.config_exception import ConfigException

__all__ = ["ConfigException", "ConfigurationAuth", "ConnectionSettings", "connection_settings", "load_configuration"]


def load_configuration(
    kubeconfig: str | None = None, *, in_cluster: bool = False, context: str | None = None
) -> kubernetes.client.Configuration:
    """Build a client configuration the way ``kubectl`` would.

    Args:
        kubeconfig: path of a kubeconfig file. ``None`` means the default location
            (``$KUBECONFIG`` or ``~/.kube/config``), falling back to the in-cluster service
            account when that cannot be loaded and ``KUBERNETES_SERVICE_HOST`` is set.
        in_cluster: use the pod's service account (token and CA under
            ``/var/run/secrets/kubernetes.io/serviceaccount``) and ignore ``kubeconfig``.
        context: the kubeconfig context to use (None: its ``current-context``).

    Returns:
        A fresh :class:`kubernetes.client.Configuration` (the package's global default is not touched).

    Raises:
        kubernetes.config.ConfigException: no usable configuration was found.
        OSError: the kubeconfig file could not be read.
    """
    cfg = kubernetes.client.Configuration()
    if in_cluster:
        kubernetes.config.load_incluster_config(client_configuration=cfg)
        return cfg
    if kubeconfig is not None:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=cfg, persist_config=False
        )
        return cfg
    try:
        # $KUBECONFIG is read now, not when the kubernetes package was imported (its default is fixed then).
        kubernetes.config.load_kube_config(
            config_file=os.environ.get("KUBECONFIG") or None,
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    except (ConfigException, OSError):
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=cfg)
    return cfg


class ConfigurationAuth(httpx.Auth):
    """Sets ``Authorization`` on each request from a :class:`kubernetes.client.Configuration`.

    The value is ``configuration.get_api_key_with_prefix("BearerToken", alias="authorization")``,
    exactly what the ``kubernetes`` package's own ``ApiClient`` sends (``Bearer <token>``, or
    ``Basic ...`` for a kubeconfig user with a username and password). That call runs the
    configuration's ``refresh_api_key_hook`` first, which re-reads a rotated service-account token
    or re-runs an expired ``exec`` plugin. No header is set when the configuration has no
    credentials (client-certificate authentication).
    """

    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self.configuration = configuration

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the header and send the request once (no challenge/response)."""
        value = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if value:
            request.headers["Authorization"] = str(value)
        yield request


@dataclass(frozen=True)
class ConnectionSettings:
    """What an httpx client needs to talk to one API server.

    Attributes:
        base_url: the server URL (``https://host:6443``, possibly with a path prefix), no trailing ``/``.
        verify: an :class:`ssl.SSLContext` for ``https`` servers (CA bundle or the system store,
            client certificate and key, hostname checking as configured); True for ``http``.
        proxy: the kubeconfig's ``proxy-url``, else None (proxy environment variables are not read,
            as the ``kubernetes`` package's client did not read them).
        sni_hostname: the kubeconfig's ``tls-server-name`` (sent as SNI and checked against the
            certificate instead of the URL's host), else None.
        auth: per-request credentials (:class:`ConfigurationAuth`).
    """

    base_url: str
    verify: ssl.SSLContext | bool
    proxy: str | None
    sni_hostname: str | None
    auth: ConfigurationAuth


def _ssl_context(cfg: kubernetes.client.Configuration) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cfg.assert_hostname is False:
        ctx.check_hostname = False
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


def connection_settings(cfg: kubernetes.client.Configuration) -> ConnectionSettings:
    """Derive the httpx settings of ``cfg`` (see :class:`ConnectionSettings`).

    The TLS files are read once here; credentials are read per request by :class:`ConfigurationAuth`.
    The proxy ``cfg`` resolved for its host (``proxy-url``, or the proxy environment variables when
    the kubernetes package read them) is pinned on ``cfg``: later host assignments keep it.

    Raises:
        kubernetes.config.ConfigException: the host is not an ``http``/``https`` URL, or the CA bundle,
            client certificate or key cannot be read or parsed (the message names the file).
    """
    host = str(cfg.host or "").rstrip("/")
    scheme = host.partition("://")[0].lower()
    if scheme not in ("http", "https") or not host.partition("://")[2]:
        raise ConfigException(f"invalid API server URL {cfg.host!r}: expected http(s)://host[:port]")
    verify: ssl.SSLContext | bool = True
    if scheme == "https":
        try:
            verify = _ssl_context(cfg)
        except OSError as exc:  # ssl.SSLError included
            files = ", ".join(f for f in (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file) if f)
            raise ConfigException(f"cannot load the TLS files of {host} ({files}): {exc}") from None
    # Pin the proxy. The kubernetes package re-resolves a proxy taken from the environment each time
    # the host is assigned, and the kubeconfig loader's refresh hook (run before every request by
    # ConfigurationAuth) assigns it again: a scan of os.environ per request (~0.1 ms). The host never
    # changes, so neither does its proxy; assigning it through the setter keeps today's value.
    cfg.proxy = cfg.proxy
    return ConnectionSettings(
        base_url=host,
        verify=verify,
        proxy=str(cfg.proxy) if cfg.proxy else None,
        sni_hostname=str(cfg.tls_server_name) if getattr(cfg, "tls_server_name", None) else None,
        auth=ConfigurationAuth(cfg),
    )
