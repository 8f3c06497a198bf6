"""koord-descheduler: LowNodeLoad rebalancing and PodMigrationJob migration.

Mirrors ``pkg/descheduler`` of koordinator-sh/koordinator. The planning modules (:mod:`.config`,
:mod:`.usage`, :mod:`.thresholds`, :mod:`.classify`, :mod:`.anomaly`, :mod:`.evictorfilter`,
:mod:`.nodefit`, :mod:`.podorder`, :mod:`.limits`, :mod:`.lownodeload`) are pure and deterministic;
:mod:`.runner` feeds them from the cluster cache and executes the plan, :mod:`.cli` is
``koord descheduler``.
"""
