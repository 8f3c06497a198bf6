"""Reservation admission (``/validate-scheduling-koordinator-sh-v1alpha1-reservation``)."""

from __future__ import annotations

from webhooks.reservation import validating
from webhooks.webhook import Webhook

#: The validating (CREATE/UPDATE) Reservation webhook.
WEBHOOKS: list[Webhook] = [
    Webhook(validating.PATH, "validating", ("Reservation",), validating.validate),
]
