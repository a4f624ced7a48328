"""Verified webhook ingress: a provider's signed delivery becomes a ``signal`` dispatch, once
per delivery id (docs/webhooks.md).

Example::

    from tether.http import create_app
    from tether.http.webhooks import Delivery, WebhookTarget, github_webhook

    def issue_session(delivery: Delivery) -> WebhookTarget | None:
        issue = delivery.payload.get("issue")
        if issue is None:
            return None  # acknowledged, nothing admitted
        return WebhookTarget("triage", "acme", session=f"issue-{issue['number']}")

    hook = github_webhook(runtime, secret=os.environ["GITHUB_WEBHOOK_SECRET"],
                          target=issue_session)
    app = create_app(runtime, webhooks=[hook])
"""

from tether.http.webhooks._route import (
    Delivery,
    Router,
    WebhookReceipt,
    WebhookTarget,
    github_webhook,
    webhook_router,
)
from tether.http.webhooks._signature import GITHUB, HmacScheme

__all__ = (
    "GITHUB",
    "Delivery",
    "HmacScheme",
    "Router",
    "WebhookReceipt",
    "WebhookTarget",
    "github_webhook",
    "webhook_router",
)
