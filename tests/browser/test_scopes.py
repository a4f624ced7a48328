"""The console signed in as an identity (issue 39): ``tether serve --auth tokens`` on a store
where ``tether tokens create`` issued the tokens; the page shows who is signed in and hides
the controls their scopes do not allow (the scope each needs is the route's, as
``ROUTE_SCOPES`` says). A revoked token sends the page back to the sign-in."""

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import Served, output, screenshot, sign_in, tokens

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_a_reader_sees_the_session_and_no_control_that_changes_it(
    served: Served, page: "Page"
) -> None:
    console = served.console
    said = httpx.post(
        f"{console.url}/agents/assistant/me",
        json={"body": "hello reader", "session": "read"},
        headers={"Authorization": f"Bearer {served.writer.token}"},
        timeout=30,
    )
    assert said.status_code == 202, said.text
    sign_in(page, console.ui(agent="assistant", instance="me", session="read"), served.reader.token)
    expect(page.locator("#identity")).to_have_text("rita · acme")
    expect(page.locator(".msg.agent")).to_have_text(["You said: hello reader"])
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    for hidden in ("Send", "Steer", "Follow-up", "Abort", "New session"):
        expect(page.get_by_role("button", name=hidden)).to_have_count(0)
    expect(page.get_by_role("textbox", name="Message")).to_have_count(0)
    expect(page.get_by_role("navigation", name="Panels").get_by_role("link")).to_have_text(
        ["Chat", "Inspector", "Usage"]
    )
    screenshot(page, "scopes-reader")

    page.get_by_role("link", name="Inspector").click()
    page.get_by_role("button", name="Record 1", exact=True).click()
    expect(page.locator("tr.detail")).to_be_visible()
    expect(page.get_by_role("button", name="Fork here")).to_have_count(0)

    # What the page hides the server refuses too, with the scope it lacks.
    refused = httpx.post(
        f"{console.url}/agents/assistant/me",
        json={"body": "sneaky", "session": "read"},
        headers={"Authorization": f"Bearer {served.reader.token}"},
        timeout=30,
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["details"]["scope"] == "sessions:write"


def test_a_reader_sees_a_scheduled_run_but_cannot_cancel_it(served: Served, page: "Page") -> None:
    console = served.console
    later = {"body": "for later", "session": "read-later", "afterSeconds": 3600}
    said = httpx.post(
        f"{console.url}/agents/assistant/me",
        json=later,
        headers={"Authorization": f"Bearer {served.writer.token}"},
        timeout=30,
    )
    assert said.status_code == 202, said.text
    url = console.ui(agent="assistant", instance="me", session="read-later")
    sign_in(page, url, served.reader.token)
    run = page.locator("#runs .run")
    expect(run.locator(".pill")).to_have_text("scheduled")
    expect(run.locator(".due")).to_contain_text("due in")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    screenshot(page, "scopes-reader-runs")


def test_a_writer_sends_and_approves_but_neither_aborts_nor_forks(
    served: Served, page: "Page"
) -> None:
    console = served.console
    writing = console.ui(agent="assistant", instance="me", session="write")
    sign_in(page, writing, served.writer.token)
    expect(page.locator("#identity")).to_have_text("Ann Writer · acme")
    expect(page.get_by_role("button", name="Steer")).to_be_visible()
    expect(page.get_by_role("button", name="Abort")).to_have_count(0)

    message = page.get_by_role("textbox", name="Message")
    message.fill("email bob@example.com: hi")
    message.press("Enter")
    expect(page.locator("#approvals-badge")).to_have_text("1")
    expect(page.get_by_role("link", name="Open the approvals inbox")).to_be_visible()
    page.get_by_role("navigation", name="Panels").get_by_role("link", name="Approvals").click()
    gate = page.locator("#pending .gate").filter(has_text="bob@example.com")
    screenshot(page, "scopes-writer-approvals")
    gate.get_by_role("button", name="Approve").click()
    # The audit shows the name and who the server verified: the subject and the tenant.
    decided = "approve send_email by Ann Writer (ann, acme)"
    expect(page.locator("#decided li").first).to_contain_text(decided)
    page.get_by_role("link", name="Chat").click()
    expect(page.locator(".msg.agent")).to_contain_text("Email sent: dry-run email to bob")
    expect(page.locator(".notice.decided")).to_contain_text("approve by Ann Writer (ann, acme)")

    page.get_by_role("link", name="Inspector").click()
    page.get_by_role("button", name="Record 1", exact=True).click()
    expect(page.locator("tr.detail")).to_be_visible()
    expect(page.get_by_role("button", name="Fork here")).to_have_count(0)


def test_a_revoked_token_is_asked_for_again(served: Served, page: "Page") -> None:
    sign_in(page, served.console.ui(), served.revoked.token)
    expect(page.locator("#identity")).to_have_text("leaver")
    output(tokens(served.store, "revoke", served.revoked.id))
    dialog = page.get_by_role("dialog", name="Sign in")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("alert")).to_contain_text("token revoked")
    expect(page.locator("#identity")).to_have_text("")


def test_a_refusal_the_page_did_not_expect_shows_the_servers_message(
    served: Served, page: "Page"
) -> None:
    # Scopes that changed while the page was open (a JWT's, an application's hook's): the
    # server refuses what the page still offers. Here the refusal is staged for one route.
    refusal = {
        "error": {
            "type": "forbidden",
            "message": "'rita' lacks the scope 'sessions:read' this needs",
            "details": {"scope": "sessions:read"},
        }
    }
    page.route(
        "**/agents/assistant/me/conversation?*",
        lambda route: route.fulfill(status=403, json=refusal),
    )
    url = served.console.ui(agent="assistant", instance="me", session="gone")
    sign_in(page, url, served.reader.token)
    alert = page.get_by_role("log", name="Transcript").get_by_role("alert")
    expect(alert).to_have_text("'rita' lacks the scope 'sessions:read' this needs")
