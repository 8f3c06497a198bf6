"""Where the prints go (upstream ``pkg/device-daemon/printer/writer.go`` ``Writer.OutputPrints``).

- :class:`NodeLabelWriter`: the labels straight onto the Node, one JSON merge patch on ``/api/v1/nodes/<name>``
  through the API client: new or changed labels set, and labels the daemon owns
  (:data:`app.api.devicenames.DEVICE_DAEMON_LABELS`) that this round did not produce removed (``null``);
  nothing is sent when the Node already carries exactly these labels.
- :class:`FeatureFileWriter` (``--prints-output-file``): a node-feature-discovery feature file for nfd-worker's
  ``local`` source (``/etc/kubernetes/node-feature-discovery/features.d/``): one ``<name>=<value>`` per line,
  sorted, after a ``#`` comment line; written to a temporary file in the same directory and renamed over the
  old one (upstream uses ``renameio``), so nfd-worker never reads half a file. :meth:`FeatureFileWriter.remove`
  deletes it when a looping daemon stops (as upstream), so NFD drops the labels of a node that no longer runs it.

Raises:
    DeviceDaemonError: from :meth:`~Writer.output`, naming the Node or the file and the reason.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.api import devicenames as dn
from app.client.errors import ApiError, NotFound

if TYPE_CHECKING:
    from app.client.sync import Client

#: The comment line at the top of a feature file.
FEATURE_FILE_HEADER = "# written by koord device-daemon; node-feature-discovery local source format"


class DeviceDaemonError(Exception):
    """The prints could not be delivered; the message names the Node or the file and the reason."""


class Writer(Protocol):
    """Delivers one round's labels."""

    def output(self, labels: dict[str, str]) -> bool:
        """Deliver ``labels``; True when something was written, False when nothing changed.

        Raises:
            DeviceDaemonError: see the module docstring.
        """
        ...


def feature_file_text(labels: dict[str, str]) -> str:
    """The feature file for ``labels``: the header, then ``key=value`` lines sorted by key, newline-ended."""
    lines = [FEATURE_FILE_HEADER, *(f"{k}={labels[k]}" for k in sorted(labels))]
    return "\n".join(lines) + "\n"


class FeatureFileWriter:
    """Writes the node-feature-discovery feature file ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def output(self, labels: dict[str, str]) -> bool:
        """See :class:`Writer`; the parent directory is created when missing."""
        text = feature_file_text(labels)
        try:
            if self.path.is_file() and self.path.read_text() == text:
                return False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
                os.chmod(tmp, 0o644)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise DeviceDaemonError(f"cannot write the feature file {self.path}: {exc}") from exc
        return True

    def remove(self) -> None:
        """Delete the file (a stopping daemon); a missing file is fine.

        Raises:
            DeviceDaemonError: it exists and cannot be deleted.
        """
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise DeviceDaemonError(f"cannot remove the feature file {self.path}: {exc}") from exc


def label_patch(current: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    """The ``metadata.labels`` merge patch from ``current`` to ``labels``: changed or new keys with their
    value, owned keys (:data:`~app.api.devicenames.DEVICE_DAEMON_LABELS`) absent from ``labels`` as None;
    empty when nothing differs. Labels the daemon does not own are never touched."""
    patch: dict[str, Any] = {k: v for k, v in labels.items() if current.get(k) != v}
    patch.update({k: None for k in dn.DEVICE_DAEMON_LABELS if k in current and k not in labels})
    return patch


class NodeLabelWriter:
    """Writes the labels onto Node ``node_name`` through ``client`` (see the module docstring)."""

    def __init__(self, client: Client, node_name: str) -> None:
        self.client = client
        self.node_name = node_name
        self.path = f"/api/v1/nodes/{node_name}"

    def output(self, labels: dict[str, str]) -> bool:
        """See :class:`Writer`."""
        try:
            node = self.client.get(self.path)
            current = (node.get("metadata") or {}).get("labels") or {}
            patch = label_patch(current, labels)
            if not patch:
                return False
            self.client.merge_patch(self.path, {"metadata": {"labels": patch}})
        except NotFound as exc:
            raise DeviceDaemonError(f"node {self.node_name} not found (check --node-name / NODE_NAME)") from exc
        except ApiError as exc:  # ConnectionFailed included
            raise DeviceDaemonError(f"cannot label node {self.node_name}: {exc}") from exc
        return True
