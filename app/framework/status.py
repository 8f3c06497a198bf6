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
        return {
            Code.SUCCESS: "Success",
            Code.ERROR: "Error",
            Code.UNSCHEDULABLE: "Unschedulable",
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
            Code.WAIT: "Wait",
            Code.SKIP: "Skip",
        }[self]


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

    def is_success(self) -> bool:
        """True for SUCCESS (and SKIP, which means "not relevant, treat as success")."""
        return self.code in (Code.SUCCESS, Code.SKIP)

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


SUCCESS = Status()
