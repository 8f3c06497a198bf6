"""``--policy`` names and the service configuration each one runs with.

Every policy enables NodeResourcesFit and DeviceShare (which allocates GPUs at bind) and leaves
LoadAwareScheduling out: the simulated cluster has no NodeMetrics. ``Random`` does not
prioritize: kube-scheduler picks uniformly among the feasible nodes. The others set DeviceShare's
``scoringStrategy.type`` (upstream DeviceShareArgs; ``FragmentationAware`` is this project's
Fragmentation Gradient Descent strategy). ``--config FILE`` runs a plugin config file instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.framework.config import PluginSpec, SchedulerConfig, load_config
from app.sim.errors import SimInputError

POLICIES: tuple[str, ...] = ("Random", "MostAllocated", "LeastAllocated", "FragmentationAware")

#: Policy -> the authors' published policies of the same idea (expected_results ``sc_policy``).
PUBLISHED: dict[str, tuple[str, ...]] = {
    "Random": ("01-Random",),
    "MostAllocated": ("04-GpuPacking", "05-BestFit"),
    "LeastAllocated": (),
    "FragmentationAware": ("06-FGD",),
}


@dataclass(frozen=True, slots=True)
class Policy:
    """A named service configuration; ``prioritize`` False means pick uniformly among feasible nodes."""

    name: str
    config: SchedulerConfig
    prioritize: bool = True


def builtin_policy(name: str) -> Policy:
    """The configuration of a built-in policy name (case-insensitive).

    Raises:
        SimInputError: unknown name (the message lists the known ones).
    """
    canonical = next((p for p in POLICIES if p.lower() == name.lower()), None)
    if canonical is None:
        raise SimInputError(f"--policy: unknown policy {name!r} (known: {', '.join(POLICIES)})")
    if canonical == "Random":
        return Policy(canonical, SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare"))), False)
    args = {"scoringStrategy": {"type": canonical}}
    return Policy(canonical, SchedulerConfig((PluginSpec("NodeResourcesFit"), PluginSpec("DeviceShare", 1, args))))


def config_policy(path: Path, known_plugins: list[str]) -> Policy:
    """A policy from a plugin config file, named after the file (its stem).

    Raises:
        ConfigError: the file is unreadable or invalid (the message names the field).
    """
    return Policy(path.stem, load_config(path, known_plugins))
