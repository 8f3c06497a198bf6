"""Network bandwidth per QoS class: ``networkQOS`` as HTB classes on the node's interface, through netlink.

Follows upstream's NodeSLO fields (``apis/slo/v1alpha1`` ``NetworkQOS``: ``ingressRequest``, ``ingressLimit``,
``egressRequest``, ``egressLimit``, each a quantity in bits/s or a percent of ``systemStrategy.
totalNetworkBandwidth``) and the ``tc`` policy of ``resourceQOSStrategy.policies.netQOSPolicy`` (upstream's
``qosmanager/plugins/netbandwidth/tc``), with pyroute2 for netlink (no ``tc`` binary):

- On the interface, upstream's layout (``TCManager``): root qdisc ``htb`` handle ``1:`` (default class ``1:2``),
  class ``1:1`` rate = ceil = the total bandwidth, and below it ``1:2`` high (SYSTEM, LSE, LSR and unclassified
  traffic; prio 0; rate = total - the other two rates, ceil = total), ``1:3`` mid (LS, ``lsClass``; prio 1) and
  ``1:4`` low (BE, ``beClass``; prio 2), each with rate = the class's ``egressRequest`` and ceil = its
  ``egressLimit`` (defaults: request 0 -> 1 kbit/s, the least HTB takes; limit unset -> the total). A class
  whose ``networkQOS.enable`` is false gets rate 1 kbit/s and ceil = the total.
- One ``u32`` filter per pod IPv4 address (``status.podIPs``) matching the source address (offset 12 of the
  IP header) to its class: egress of a pod is shaped on the interface it leaves by. (Upstream classifies with
  ipset and an iptables ``CLASSIFY`` rule; u32 filters keep everything in one netlink family.)
- Ingress (``ingressRequest`` / ``ingressLimit``), when an enabled class sets either: an ``ingress`` qdisc on the
  interface redirects every IPv4 packet (``u32`` match-all, action ``mirred egress redirect``) to an ifb device
  (``koord-ifb0`` by default, created and set up by the agent), which holds the same HTB tree with the ingress
  values, pods classified by destination address (offset 16). Without ingress values both are removed.

The qdisc is rebuilt only when the plan (classes, rates, pod addresses) changes; otherwise nothing is sent.
Support: pyroute2 importable, the interface present, ``netQOSPolicy`` ``tc``, a total bandwidth above 0.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent.states.nodeslo import class_qos, network_value
from agent.states.pods import PodMeta
from app.api.koordext import QoSClass
from app.api.quantity import QuantityError, int_value
from app.api.slo import NodeSLOSpec

log = logging.getLogger("agent.qos.netqos")

ROOT_HANDLE = 0x10000  # 1:
TOTAL_CLASS = 0x10001  # 1:1
#: upstream's classes: minor and prio of high (SYSTEM, LSE, LSR, unclassified: the default), mid (LS), low (BE).
HIGH, MID, LOW = 2, 3, 4
PRIO = {HIGH: 0, MID: 1, LOW: 2}
MIN_RATE_BPS = 1000
ETH_P_IP = 0x0800
FILTER_PRIO = 10


@dataclass(frozen=True, slots=True)
class NetClass:
    """One HTB class: minor (``1:<minor>``), rate and ceil in bits/s, prio (lower is served first)."""

    minor: int
    rate: int
    ceil: int
    prio: int = 0


@dataclass(frozen=True, slots=True)
class NetPlan:
    """What the interface should hold: the total (bits/s), the egress classes, ``(IPv4 address, minor)`` filters,
    and the ingress classes (empty: no ingress shaping)."""

    total: int
    classes: tuple[NetClass, ...]
    filters: tuple[tuple[str, int], ...]
    ingress: tuple[NetClass, ...] = ()


def _class_of(pod: PodMeta) -> int:
    """The HTB class minor of a pod (upstream's ``GetPodNetQoSClass``: LS mid, BE low, the others high)."""
    return {QoSClass.LS: MID, QoSClass.BE: LOW}.get(pod.qos, HIGH)


def total_bandwidth(spec: NodeSLOSpec) -> int:
    """``systemStrategy.totalNetworkBandwidth`` in bits/s; 0 when unset or malformed."""
    raw = spec.system_strategy.total_network_bandwidth if spec.system_strategy is not None else None
    try:
        return max(int_value(raw), 0) if raw is not None else 0
    except QuantityError:
        return 0


def plan(spec: NodeSLOSpec, pods: list[PodMeta]) -> NetPlan | None:
    """The HTB plan of the NodeSLO and the pods' addresses; None when no class enables ``networkQOS`` or the
    total bandwidth is 0 (nothing to shape).

    Raises:
        ValueError: a request or limit does not parse (the NodeSLO intake refuses those first).
    """
    total = total_bandwidth(spec)
    classes: list[NetClass] = []
    ingress: list[NetClass] = []
    any_enabled = any_ingress = False

    def one(minor: int, request: Any, limit: Any) -> NetClass:
        rate = max(network_value(request, total), MIN_RATE_BPS) if request is not None else MIN_RATE_BPS
        ceil = max(network_value(limit, total), MIN_RATE_BPS) if limit is not None else total
        ceil = min(ceil, total) if total > 0 else ceil
        return NetClass(minor, min(rate, ceil), ceil, PRIO[minor])

    def high(others: list[NetClass]) -> NetClass:
        rate = max(total - sum(c.rate for c in others), MIN_RATE_BPS)
        return NetClass(HIGH, min(rate, total), total, PRIO[HIGH])

    for name, minor in (("LS", MID), ("BE", LOW)):
        cfg = class_qos(spec, name).network_qos
        if cfg is not None and cfg.enable:
            any_enabled = True
            any_ingress = any_ingress or cfg.ingress_request is not None or cfg.ingress_limit is not None
            classes.append(one(minor, cfg.egress_request, cfg.egress_limit))
            ingress.append(one(minor, cfg.ingress_request, cfg.ingress_limit))
        else:
            classes.append(one(minor, None, None))
            ingress.append(one(minor, None, None))
    if not any_enabled or total <= 0:
        return None
    classes.insert(0, high(classes))
    ingress.insert(0, high(ingress))
    filters: list[tuple[str, int]] = []
    for pod in pods:
        if not pod.active:
            continue
        for ip in pod.ips:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                continue
            if addr.version == 4:
                filters.append((str(addr), _class_of(pod)))
    return NetPlan(total, tuple(classes), tuple(sorted(set(filters))), tuple(ingress) if any_ingress else ())


def _u32_key(ip: str, offset: int = 12) -> str:
    """pyroute2's u32 key matching IPv4 ``ip`` at ``offset`` of the IP header (12 source, 16 destination):
    ``value/mask+offset``."""
    return f"0x{int(ipaddress.IPv4Address(ip)):08x}/0xffffffff+{offset}"


INGRESS_HANDLE = 0xFFFF0000  # ffff:
DEFAULT_IFB = "koord-ifb0"


def _htb_tree(ipr: Any, idx: int, total: int, classes: tuple[NetClass, ...], filters: Any, offset: int) -> None:
    """Root ``htb 1:`` on link ``idx``, ``1:1`` at ``total`` bits/s, the classes below it, a u32 filter per
    ``(address, minor)`` matching the address at ``offset``."""
    ipr.tc("add", "htb", idx, ROOT_HANDLE, default=HIGH)
    ipr.tc("add-class", "htb", idx, TOTAL_CLASS, parent=ROOT_HANDLE, rate=f"{total}bit", ceil=f"{total}bit")
    for c in classes:
        ipr.tc(
            "add-class",
            "htb",
            idx,
            ROOT_HANDLE | c.minor,
            parent=TOTAL_CLASS,
            rate=f"{c.rate}bit",
            ceil=f"{c.ceil}bit",
            prio=c.prio,
        )
    for ip, minor in filters:
        ipr.tc(
            "add-filter",
            "u32",
            idx,
            parent=ROOT_HANDLE,
            prio=FILTER_PRIO,
            protocol=ETH_P_IP,
            target=ROOT_HANDLE | minor,
            keys=[_u32_key(ip, offset)],
        )


class NetQoS:
    """Applies :class:`NetPlan` values to an interface over netlink (pyroute2).

    Args:
        interface: the node's interface pods' traffic leaves by.
        netns: a named network namespace the interface lives in (None: the agent's own).
        dry_run: log the plan, change nothing.
        ifb: the ifb device ingress traffic is redirected to and shaped on (created when needed).
    """

    def __init__(
        self, interface: str, netns: str | None = None, *, dry_run: bool = False, ifb: str = DEFAULT_IFB
    ) -> None:
        self.interface = interface
        self.ifb = ifb
        self.netns = netns
        self.dry_run = dry_run
        self.applied: NetPlan | None = None
        self._handle: Any = None

    @contextlib.contextmanager
    def _ipr(self) -> Iterator[Any]:
        """The netlink socket, opened once and kept (opening one, in a namespace above all, costs tens of ms);
        closed on any error, so the next call opens a fresh one."""
        if self._handle is None:
            from pyroute2 import IPRoute, NetNS

            self._handle = NetNS(self.netns) if self.netns else IPRoute()
        try:
            yield self._handle
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the netlink socket (reopened on the next use)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.close()

    def supported(self) -> tuple[bool, str]:
        """``(True, "")`` when pyroute2 loads and the interface exists, else ``(False, why not)``."""
        try:
            import pyroute2  # noqa: F401
        except ImportError as exc:
            return False, f"pyroute2 is not installed ({exc})"
        try:
            with self._ipr() as ipr:
                if not ipr.link_lookup(ifname=self.interface):
                    return False, f"no interface {self.interface!r}"
        except Exception as exc:  # NetlinkError, OSError: no netns, no permission
            return False, f"netlink unusable: {exc}"
        return True, ""

    def present(self) -> bool:
        """Whether the interface's root qdisc is still the agent's HTB ``1:`` (read over netlink; False on errors)."""
        try:
            with self._ipr() as ipr:
                idx = ipr.link_lookup(ifname=self.interface)[0]
                kinds = {
                    q.get_attr("TCA_KIND") for q in ipr.get_qdiscs(idx) if q["handle"] in (ROOT_HANDLE, INGRESS_HANDLE)
                }
                want_ingress = self.applied is not None and bool(self.applied.ingress)
                return "htb" in kinds and ("ingress" in kinds) == want_ingress
        except Exception as exc:  # NetlinkError, OSError, IndexError
            log.debug("network QoS on %s not readable: %s", self.interface, exc)
            return False

    def apply(self, wanted: NetPlan | None) -> bool:
        """Make the interface (and the ifb device, for ingress) hold ``wanted`` (None: remove the agent's qdiscs);
        True when something was sent. Netlink errors are logged, never raised; the next call tries again."""
        if wanted == self.applied:
            return False
        if self.dry_run:
            log.info("dry-run: would set HTB on %s: %s", self.interface, wanted)
            self.applied = wanted
            return True
        try:
            with self._ipr() as ipr:
                idx = ipr.link_lookup(ifname=self.interface)[0]
                for kind, handle in (("htb", ROOT_HANDLE), ("ingress", INGRESS_HANDLE)):
                    try:
                        ipr.tc("del", kind, idx, handle)
                    except Exception as exc:  # none of ours yet
                        log.debug("no %s qdisc to remove on %s: %s", kind, self.interface, exc)
                found = ipr.link_lookup(ifname=self.ifb)
                if found and not (wanted is not None and wanted.ingress):
                    ipr.link("del", index=found[0])
                if wanted is not None:
                    _htb_tree(ipr, idx, wanted.total, wanted.classes, wanted.filters, 12)
                    if wanted.ingress:
                        if not found:
                            ipr.link("add", ifname=self.ifb, kind="ifb")
                        ifb = ipr.link_lookup(ifname=self.ifb)[0]
                        ipr.link("set", index=ifb, state="up")
                        try:
                            ipr.tc("del", "htb", ifb, ROOT_HANDLE)
                        except Exception as exc:  # a new ifb
                            log.debug("no htb to remove on %s: %s", self.ifb, exc)
                        _htb_tree(ipr, ifb, wanted.total, wanted.ingress, wanted.filters, 16)
                        ipr.tc("add", "ingress", idx, INGRESS_HANDLE)
                        ipr.tc(
                            "add-filter",
                            "u32",
                            idx,
                            parent=INGRESS_HANDLE,
                            prio=1,
                            protocol=ETH_P_IP,
                            target=ROOT_HANDLE,
                            keys=["0x0/0x0+0"],
                            action={"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb},
                        )
        except Exception as exc:  # NetlinkError, OSError
            log.warning("network QoS on %s not applied: %s", self.interface, exc)
            self.applied = None
            return False
        log.info(
            "network QoS on %s: total %d bit/s, egress classes %s, ingress %s, %d pod addresses",
            self.interface,
            wanted.total if wanted else 0,
            [(f"1:{c.minor}", c.rate, c.ceil) for c in wanted.classes] if wanted else [],
            [(f"1:{c.minor}", c.rate, c.ceil) for c in wanted.ingress] if wanted and wanted.ingress else "off",
            len(wanted.filters) if wanted else 0,
        )
        self.applied = wanted
        return True
