"""Host applications: out-of-band (non-pod) processes the NodeSLO declares, measured by their cgroup.

Mirrors upstream ``metricsadvisor/collectors/hostapplication/host_app_collector.go`` and
``pkg/koordlet/util/host_application.go`` (``GetHostAppCgroupRelativePath``): each entry of
``NodeSLO.spec.hostApplications`` names a cgroup dir

- without ``cgroupPath``: ``host-latency-sensitive/<name>`` for QoS LSE/LSR/LS,
  ``host-best-effort/<name>`` for BE, ``<name>`` otherwise (relative to the cgroup root);
- with ``cgroupPath``: the base dir (``CgroupRoot``: the root; ``Kubepods``: the kubepods dir;
  ``KubepodsBurstable`` / ``KubepodsBesteffort``: its QoS dirs) joined with ``parentDir`` and
  ``relativePath``;

and its cpu rate (cores, from cumulative cpu time) and memory working set (bytes) are sampled each
round, the first cpu reading of an app giving no rate yet, as upstream. An app whose cgroup cannot be
read is skipped (logged once per change of its error), never fatal.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

from agent.cgroups import CgroupLayout, CgroupPathError
from agent.collectors.pods import CgroupUsageReader, Usage
from app.api.slo import HostApplicationSpec

log = logging.getLogger("agent.collectors.hostapps")

#: ``CgroupBaseType`` values (``apis/slo/v1alpha1/host_application.go``).
CGROUP_BASE_ROOT = "CgroupRoot"
CGROUP_BASE_KUBEPODS = "Kubepods"
CGROUP_BASE_BURSTABLE = "KubepodsBurstable"
CGROUP_BASE_BESTEFFORT = "KubepodsBesteffort"

_LS_QOS = frozenset({"LSE", "LSR", "LS"})


@dataclass(frozen=True, slots=True)
class HostApp:
    """A host application as the agent uses it: ``name``, Koordinator ``qos`` and ``priority`` class names
    ("" when unset), the cgroup ``base`` type ("" without ``cgroupPath``) and its relative cgroup ``dir``."""

    name: str
    qos: str
    priority: str
    base: str
    dir: str

    @property
    def is_be_in_besteffort(self) -> bool:
        """QoS BE and running under the besteffort dir: the only host apps upstream counts as BE
        (``NonBEHostAppFilter`` is its negation)."""
        return self.qos == "BE" and self.base == CGROUP_BASE_BESTEFFORT


def host_app_dir(layout: CgroupLayout, spec: HostApplicationSpec) -> str:
    """The relative cgroup dir of ``spec`` (``GetHostAppCgroupRelativePath``).

    Raises:
        CgroupPathError: no name, or a path that leaves the cgroup tree (absolute or ``..``).
    """
    name = spec.name or ""
    path = spec.cgroup_path
    if path is None:
        base = {**dict.fromkeys(_LS_QOS, "host-latency-sensitive"), "BE": "host-best-effort"}.get(spec.qos or "", "")
        if not name:
            raise CgroupPathError("host application without a name")
        parts = [base, name]
    else:
        base_dir = {
            CGROUP_BASE_KUBEPODS: layout.qos_dir("Guaranteed"),
            CGROUP_BASE_BURSTABLE: layout.qos_dir("Burstable"),
            CGROUP_BASE_BESTEFFORT: layout.qos_dir("BestEffort"),
        }.get(path.base or "", "")
        parts = [base_dir, path.parent_dir or "", path.relative_path or ""]
    joined = posixpath.normpath("/".join(p.strip("/") for p in parts if p.strip("/")))
    if joined in ("", ".") or joined.startswith("..") or "/../" in f"/{joined}/":
        raise CgroupPathError(f"host application {name!r}: cgroup path {joined!r} is not inside the cgroup tree")
    return joined


def host_apps_of(layout: CgroupLayout, specs: list[HostApplicationSpec] | None) -> list[HostApp]:
    """The host applications of a NodeSLO spec with their cgroup dirs; invalid entries are logged and left out."""
    out: list[HostApp] = []
    for spec in specs or []:
        try:
            rel = host_app_dir(layout, spec)
        except CgroupPathError as exc:
            log.warning("ignoring NodeSLO host application: %s", exc)
            continue
        base = (spec.cgroup_path.base or "") if spec.cgroup_path is not None else ""
        out.append(HostApp(spec.name or "", spec.qos or "", spec.priority or "", base, rel))
    return out


class HostAppCollector:
    """Samples every host application's cgroup once per round (``collectHostAppResUsed``)."""

    def __init__(self, reader: CgroupUsageReader) -> None:
        self.reader = reader
        self._errors: dict[str, str] = {}

    def collect(self, apps: list[HostApp], now: float) -> dict[str, Usage]:
        """Usage by app name at ``now`` (epoch seconds); apps whose cgroup cannot be read are left out."""
        out: dict[str, Usage] = {}
        for app in apps:
            try:
                out[app.name] = self.reader.read(app.dir, now)
            except (OSError, ValueError) as exc:
                message = str(exc)
                if self._errors.get(app.name) != message:
                    log.info("host application %s: cgroup %s not read: %s", app.name, app.dir, message)
                    self._errors[app.name] = message
                continue
            self._errors.pop(app.name, None)
        return out
