"""Admission webhook endpoints: one POST route per :class:`webhooks.webhook.Webhook`.

- A body that is not an admission.k8s.io/v1 AdmissionReview gets HTTP 400 ``{"message": ...}``.
- An ``object`` or ``oldObject`` with a field of the wrong JSON type for the webhook's kind
  (:mod:`webhooks.shapes`) is answered ``allowed: false`` with code 400 and the field errors
  (``metadata: Invalid value: []: must be an object``); the handler does not run.
- A handler's :class:`~webhooks.webhook.AdmissionError` is answered ``allowed: false`` with its
  code (400 by default); any other exception with code 500. The request uid is always echoed.
- The API server's ``?timeout=5s`` query parameter is accepted and ignored (handlers are fast).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from app.server.state import ServiceState
from app.server.wire import BadRequest, decode, error_response, json_response
from webhooks.admission import AdmissionReview, errored
from webhooks.shapes import describe, review_errors
from webhooks.webhook import Webhook, WebhookContext

log = logging.getLogger(__name__)


def _endpoint(hook: Webhook, context: WebhookContext) -> Callable[[Request], Awaitable[Response]]:
    async def review(request: Request) -> Response:
        start = time.perf_counter()
        state: ServiceState = request.app.state.service
        try:
            req = decode(await request.body(), AdmissionReview).request
        except BadRequest as exc:
            response = error_response(str(exc), 400)
        else:
            wrong_types = review_errors(hook.kinds, req)
            if wrong_types:
                answer = errored(req.uid, describe(wrong_types), 400)
            else:
                try:
                    answer = hook.handler(req, context)
                except Exception as exc:
                    code = getattr(exc, "code", 500)
                    if code == 500:
                        log.exception(
                            "webhook %s failed on %s %s/%s", hook.path, req.operation, req.namespace, req.name
                        )
                    answer = errored(req.uid, str(exc) or type(exc).__name__, code)
            answer.uid = req.uid
            response = json_response(answer.to_review())
        state.metrics.observe(f"webhook:{hook.path}", response.status_code, time.perf_counter() - start)
        return response

    review.__doc__ = f"{hook.type} admission webhook for {', '.join(hook.kinds)} (AdmissionReview in and out)."
    return review


def install_webhooks(app: FastAPI, hooks: list[Webhook], context: WebhookContext) -> None:
    """Mount every webhook of ``hooks`` on its path."""
    for hook in hooks:
        app.add_api_route(
            hook.path,
            _endpoint(hook, context),
            methods=["POST"],
            tags=["webhooks"],
            name=f"{hook.type}:{hook.path}",
            response_class=Response,
        )
