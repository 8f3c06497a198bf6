"""Reservation: capacity held on a node for pods that come later (upstream pkg/scheduler/plugins/reservation)."""
