"""The manager's controllers: NodeSLO and batch resources (koord-manager's slo-controller)."""
