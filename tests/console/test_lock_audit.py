"""Object lock and the audit log in the console: an object's retention and legal hold on its
page, and the admins' audit view with its filters and the chain's verification."""

from __future__ import annotations

import datetime
import secrets
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, expect


def test_an_objects_retention_and_legal_hold_on_its_page(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    page = admin_page
    name = f"locked-{secrets.token_hex(3)}"
    created = admin_api.post("/buckets", json={"name": name, "object_lock_enabled": True})
    assert created.status_code == 201
    version = admin_api.put(f"/buckets/{name}/objects/docs/contract.pdf", content=b"%PDF").json()[
        "version_id"
    ]
    page.goto(f"/console/#/buckets/{name}/object?key={quote('docs/contract.pdf', safe='')}")
    card = page.get_by_role("region", name="Retention and legal hold")
    expect(card.get_by_text("No retention")).to_be_visible()

    end = datetime.datetime.now() + datetime.timedelta(days=3)
    card.get_by_label("Retention mode").select_option("compliance")
    card.get_by_label("Retain until").fill(end.strftime("%Y-%m-%dT%H:%M"))
    card.get_by_role("button", name="Set retention").click()
    expect(card.locator(".badge").filter(has_text="compliance")).to_be_visible()
    got = admin_api.get(f"/buckets/{name}/objects/docs/contract.pdf/retention").json()
    assert got["mode"] == "compliance" and got["version_id"] == version
    until = datetime.datetime.fromisoformat(got["retain_until"])
    assert abs((until - end.astimezone(datetime.UTC)).total_seconds()) < 61

    card.get_by_role("button", name="Turn legal hold on").click()
    expect(card.get_by_role("button", name="Turn legal hold off")).to_be_visible()
    hold = admin_api.get(f"/buckets/{name}/objects/docs/contract.pdf/legal-hold").json()
    assert hold["status"] == "on"
    versions = page.get_by_role("region", name="Versions")
    expect(versions.get_by_text("legal hold")).to_be_visible()

    # Removing a compliance retention is refused, by an admin too; the page says why.
    card.get_by_role("button", name="Remove retention").click()
    expect(page.get_by_text("compliance retention until", exact=False).first).to_be_visible()
    assert admin_api.get(f"/buckets/{name}/objects/docs/contract.pdf/retention").json()["mode"]


def test_a_bucket_without_object_lock_says_so(admin_page: Page, admin_api: httpx.Client) -> None:
    name = f"plain-{secrets.token_hex(3)}"
    admin_api.post("/buckets", json={"name": name})
    admin_api.put(f"/buckets/{name}/objects/a.txt", content=b"a")
    admin_page.goto(f"/console/#/buckets/{name}/object?key=a.txt")
    card = admin_page.get_by_role("region", name="Retention and legal hold")
    expect(card.get_by_text("created without object lock")).to_be_visible()


def test_the_audit_view_filters_and_verifies(admin_page: Page, admin_api: httpx.Client) -> None:
    page = admin_page
    name = f"audited-{secrets.token_hex(3)}"
    admin_api.post("/buckets", json={"name": name})
    for key in ("first.txt", "second.txt"):
        admin_api.put(f"/buckets/{name}/objects/{key}", content=b"x")
    page.get_by_role("link", name="Audit log").click()
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    filters = page.get_by_role("form", name="Audit filters")
    filters.get_by_label("Bucket").fill(name)
    filters.get_by_role("button", name="Apply filters").click()
    table = page.get_by_role("table", name="Audit records")
    expect(table.get_by_role("row")).to_have_count(4)  # the header, the creation, two writes
    expect(table.get_by_text("bucket:create")).to_be_visible()
    expect(table.get_by_text(f"{name}/first.txt")).to_be_visible()
    expect(table.get_by_text("object:write").first).to_be_visible()
    page.get_by_role("button", name="Verify chain").click()
    expect(page.get_by_text("The chain holds")).to_be_visible()
