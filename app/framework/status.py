"""Plugin result codes and statuses (k8s.io/kube-scheduler/framework Status)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class Code(IntEnum):
    """Status codes, numbered as kube-scheduler numbers them."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5

    @property
    def label(self) -> str:
        """Name as kube-scheduler prints it (``Success``, ``Unschedulable``, ...)."""
        return _LABELS[self]  # by value: no dict built per call (it was, on every /filter with failures)


#: :attr:`Code.label` by code value.
_LABELS = ("Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip")
assert len(_LABELS) == len(Code) and all(c == i for i, c in enumerate(Code))


_SKIP = Code.SKIP
_WAIT = Code.WAIT
_REJECTED = (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one plugin call.

    Attributes:
        code: the result code.
        reasons: human-readable reasons; ``message`` joins them with ", " as kube-scheduler does.
        plugin: the plugin that produced it ("" when not yet attributed).
    """

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = field(default_factory=tuple)
    plugin: str = ""
    #: Reasons joined with ", " (computed once: filter answers read it for every failing node).
    message: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", ", ".join(self.reasons))

    # The checks below run several times per plugin per pod (a /bind alone makes ~20): ``Code.X`` is an
    # attribute look-up on the Enum class, so they compare against module constants instead, and SUCCESS,
    # numbered 0, is the one falsy code (issue 29: is_success 0.145 -> 0.041 us a call on CPython 3.11).
    def is_success(self) -> bool:
        """True for SUCCESS only, as upstream's ``IsSuccess`` (SKIP and WAIT are not success)."""
        return not self.code

    def is_skip(self) -> bool:
        """True for SKIP: the plugin has nothing to do for this pod (PreFilter/PreScore/Bind)."""
        return self.code == _SKIP

    def is_wait(self) -> bool:
        """True for WAIT: a Permit plugin holds the pod (see :mod:`app.framework.waiting`)."""
        return self.code == _WAIT

    def is_rejected(self) -> bool:
        """True for UNSCHEDULABLE and UNSCHEDULABLE_AND_UNRESOLVABLE (upstream ``IsRejected``)."""
        return self.code in _REJECTED

    def with_plugin(self, plugin: str) -> Status:
        """This status attributed to ``plugin`` (upstream ``WithFailedPlugin``)."""
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "") -> Status:
        """An UNSCHEDULABLE status with ``reasons``."""
        return Status(Code.UNSCHEDULABLE, tuple(reasons), plugin)

    @staticmethod
    def unresolvable(*reasons: str, plugin: str = "") -> Status:
        """An UNSCHEDULABLE_AND_UNRESOLVABLE status with ``reasons`` (preemption cannot help)."""
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, tuple(reasons), plugin)

    @staticmethod
    def error(*reasons: str, plugin: str = "") -> Status:
        """An ERROR status with ``reasons``."""
        return Status(Code.ERROR, tuple(reasons), plugin)

    @staticmethod
    def skip(plugin: str = "") -> Status:
        """A SKIP status: PreFilter skips the plugin's Filter, PreScore its Score, Bind passes to the next binder."""
        return Status(Code.SKIP, (), plugin)

    @staticmethod
    def wait(*reasons: str, plugin: str = "") -> Status:
        """A WAIT status (Permit): the pod waits until allowed, rejected or timed out."""
        return Status(Code.WAIT, tuple(reasons), plugin)


SUCCESS = Status()
#: The shared SKIP status (a plugin may also return ``Status.skip(plugin)``).
SKIP = Status(Code.SKIP)
