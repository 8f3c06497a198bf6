"""Serving certificate reload without restart.

uvicorn takes certificate *files*; this module builds the :class:`ssl.SSLContext` itself (handed
to uvicorn through ``ssl_context_factory``) and, when the files change (a renewed cert-manager
Secret, ``koord certs`` run again), loads the new chain **into the same context**: new TLS
handshakes get the new certificate, open connections keep theirs. A half-written or mismatched
pair is refused and the previous certificate stays in use until a good pair appears (logged and
counted in :attr:`CertReloader.failures`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger(__name__)


class TLSConfigError(Exception):
    """The certificate or key cannot be loaded; the message names the files and the reason."""


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks: Secret volumes swap a ..data symlink
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class CertReloader:
    """A server :class:`ssl.SSLContext` kept in step with ``cert_file`` / ``key_file`` (PEM).

    Args:
        cert_file: certificate chain (leaf first).
        key_file: private key of the leaf.
        poll_seconds: how often :meth:`watch` checks the files.
        client_ca_file: CA bundle (PEM) client certificates are verified against. With it the server
            asks every client for a certificate (``CERT_OPTIONAL``: a client may send none, and
            :mod:`app.server.clientauth` decides per path; one it sends must verify). Loaded once:
            a new client CA needs a restart.

    Raises:
        TLSConfigError: the initial pair or the client CA cannot be loaded (unreadable, not PEM, key
            does not match).
    """

    def __init__(
        self,
        cert_file: str | Path,
        key_file: str | Path,
        *,
        poll_seconds: float = 1.0,
        client_ca_file: str | Path | None = None,
    ) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.poll_seconds = poll_seconds
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_alpn_protocols(["http/1.1"])
        self.reloads = 0
        self.failures = 0
        self._stamps = self._current_stamps()
        self._load(self.context)
        if client_ca_file is not None:
            try:
                self.context.load_verify_locations(cafile=str(client_ca_file))
            except (OSError, ssl.SSLError) as exc:
                raise TLSConfigError(f"cannot load the client CA {client_ca_file}: {exc}") from None
            self.context.verify_mode = ssl.CERT_OPTIONAL

    def _current_stamps(self) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
        return (_stamp(self.cert_file), _stamp(self.key_file))

    def _load(self, context: ssl.SSLContext) -> None:
        try:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (OSError, ssl.SSLError) as exc:
            raise TLSConfigError(f"cannot load {self.cert_file} / {self.key_file}: {exc}") from None

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last load; True if the new pair is now served.

        A pair that does not load (partly written, key and certificate from different renewals)
        is skipped and retried on the next change check; the served certificate stays.
        """
        stamps = self._current_stamps()
        if stamps == self._stamps:
            return False
        try:
            self._load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))  # validate before touching the live context
            self._load(self.context)
        except TLSConfigError as exc:
            self.failures += 1
            log.warning("keeping the current serving certificate: %s", exc)
            return False
        self._stamps = stamps
        self.reloads += 1
        log.debug("serving certificate reloaded from %s", self.cert_file)
        return True

    async def watch(self) -> None:
        """Poll the files every ``poll_seconds`` and reload on change, until cancelled."""
        while True:
            await asyncio.sleep(self.poll_seconds)
            self.reload_if_changed()
