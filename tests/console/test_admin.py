"""Administration in the console: users and access keys, the dashboard's figures, and what a
plain user sees (its own buckets only, no admin pages)."""

from __future__ import annotations

import secrets

import httpx
from playwright.sync_api import Page, expect

from tests.console.conftest import sign_in
from tests.serverproc import ServerProcess


def test_manage_a_user_and_an_access_key(
    admin_page: Page, admin_api: httpx.Client, console_server: ServerProcess
) -> None:
    page = admin_page
    username, password = f"ann-{secrets.token_hex(3)}", "ann-password-123"
    page.get_by_role("link", name="Users").click()
    page.get_by_role("button", name="Create user").click()
    dialog = page.get_by_role("dialog", name="Create user")
    dialog.get_by_label("Username").fill(username)
    dialog.get_by_label("Password").fill(password)
    dialog.get_by_label("Role").select_option("user")
    dialog.get_by_role("button", name="Create user").click()
    row = page.get_by_role("row").filter(has_text=username)
    expect(row).to_be_visible()
    user = next(u for u in admin_api.get("/users").json()["users"] if u["username"] == username)
    assert user["role"] == "user" and user["status"] == "active"

    page.get_by_role("button", name=f"Disable {username}").click()
    expect(page.get_by_role("button", name=f"Enable {username}")).to_be_visible()
    assert admin_api.get(f"/users/{user['user_id']}").json()["status"] == "disabled"
    page.get_by_role("button", name=f"Enable {username}").click()
    expect(page.get_by_role("button", name=f"Disable {username}")).to_be_visible()

    # A key for the new user; its secret is shown once and works.
    page.get_by_role("link", name="Access keys").click()
    page.get_by_role("button", name="Create access key").click()
    dialog = page.get_by_role("dialog", name="Create access key")
    dialog.get_by_label("Key name").fill("backup job")
    dialog.get_by_label("For user").select_option(label=username)
    dialog.get_by_role("button", name="Create key").click()
    shown = page.get_by_role("dialog", name="New access key")
    key_id = shown.get_by_label("Access key id").input_value()
    secret = shown.get_by_label("Secret key").input_value()
    assert key_id.startswith("bk_") and secret.startswith("sk_")
    shown.get_by_role("button", name="Done").click()
    with httpx.Client(base_url=console_server.api, auth=(key_id, secret)) as as_ann:
        assert as_ann.get("/buckets").status_code == 200
        page.get_by_role("button", name=f"Revoke key {key_id}").click()
        expect(page.get_by_role("button", name=f"Reactivate key {key_id}")).to_be_visible()
        assert as_ann.get("/buckets").status_code == 401
    page.get_by_role("button", name=f"Delete key {key_id}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete key").click()
    expect(page.get_by_role("button", name=f"Reactivate key {key_id}")).to_have_count(0)

    page.get_by_role("link", name="Users").click()
    page.get_by_role("button", name=f"Delete user {username}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete user").click()
    expect(page.get_by_role("row").filter(has_text=username)).to_have_count(0)
    assert admin_api.get(f"/users/{user['user_id']}").status_code == 404


def test_a_plain_user_sees_only_its_own_buckets(page: Page, admin_api: httpx.Client) -> None:
    username, password = f"bob-{secrets.token_hex(3)}", "bob-password-123"
    created = admin_api.post("/users", json={"username": username, "password": password})
    assert created.status_code == 201, created.text
    theirs = f"admins-{secrets.token_hex(3)}"
    assert admin_api.post("/buckets", json={"name": theirs}).status_code == 201

    sign_in(page, username, password)
    expect(page.get_by_text("No buckets yet")).to_be_visible()
    expect(page.get_by_role("link", name="Users")).to_have_count(0)
    expect(page.get_by_role("link", name="Dashboard")).to_have_count(0)
    mine = f"bobs-{secrets.token_hex(3)}"
    page.get_by_role("button", name="Create bucket").click()
    page.get_by_role("dialog").get_by_label("Bucket name").fill(mine)
    page.get_by_role("dialog").get_by_role("button", name="Create bucket").click()
    expect(page.get_by_role("heading", name=mine)).to_be_visible()
    page.get_by_role("link", name="Buckets", exact=True).first.click()
    expect(page.get_by_role("link", name=mine, exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=theirs, exact=False)).to_have_count(0)
    # Another user's bucket by address: the API's answer, shown by the console.
    page.goto(f"/console/#/buckets/{theirs}")
    expect(page.get_by_role("alert")).to_contain_text("Could not list objects")
    # Admin pages by address are not offered either.
    page.goto("/console/#/users")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()


def test_the_dashboard_shows_storage_requests_and_put_latency(
    admin_page: Page, admin_api: httpx.Client
) -> None:
    bucket = f"dash-{secrets.token_hex(3)}"
    admin_api.post("/buckets", json={"name": bucket})
    for index in range(5):
        admin_api.put(f"/buckets/{bucket}/objects/o{index}", content=b"z" * 1000)
    info = admin_api.get("/system/info").json()
    page = admin_page
    page.get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", name="Uploads (PUT)")).to_be_visible()
    expect(page.get_by_text(f"{info['objects']:,} objects in")).to_be_visible()
    latency = page.get_by_role("table", name="PUT latency over the last")
    expect(latency.get_by_role("rowheader", name="journal commit")).to_be_visible()
    expect(latency.get_by_role("rowheader", name="total")).to_be_visible()
    p50 = latency.get_by_role("row").filter(has_text="total").get_by_role("cell").first
    expect(p50).to_contain_text(" ms")
    expect(page.get_by_role("meter", name="Disk used")).to_be_visible()
