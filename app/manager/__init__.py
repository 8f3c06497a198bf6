"""The manager's controllers: NodeSLO and batch resources (koord-manager's slo-controller).

- :mod:`app.manager.colocation` / :mod:`app.manager.sloconfig`: the ``slo-controller-config`` ConfigMap.
- :mod:`app.manager.batch`: upstream's batch allocatable formula; :mod:`app.manager.inputs` reads its inputs.
- :mod:`app.manager.controllers`: :class:`SLOControllers`, the reconcile loop over any Source.
- :mod:`app.manager.cli`: ``koord manager`` (leader election on a Lease).

Layer: beside :mod:`app.sim`, below :mod:`app.cli`; may import :mod:`app.server` and everything below it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.server.state import ServiceState


async def run_embedded_controllers(state: ServiceState) -> None:
    """Background task of the service in embedded mode: the controllers on the service's own cache and source.

    The controllers (their metrics are registered once, on the service's registry) run as their own supervised
    loop, ``slo-controllers``: a failed round restarts their :meth:`~app.manager.controllers.SLOControllers.run`,
    not this set-up. Cancelling this task cancels that loop."""
    from app.manager.controllers import SLOControllers

    controllers = SLOControllers(state.cache, state.source, registry=state.metrics.registry)
    await state.loops.spawn("slo-controllers", controllers.run)
