"""The GitHub emulator's OAuth web flow (GitHub App user access tokens), over real HTTP on
loopback: the Authorize page and its form, the code exchange and its errors, `GET /user`."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import httpx
import jwt
import pytest

from shared.devstack.emulator.server import GitHubEmulator

INSTALLATION = 31
CLIENT_ID = "Iv1.testclient"
SECRET = "s3cret-of-the-app"
CALLBACK = "http://127.0.0.1:1/auth/callback?next=%2Fjobs"


@pytest.fixture
def emulator(app_key: str) -> Iterator[GitHubEmulator]:
    emu = GitHubEmulator(
        app_id=7, app_key=app_key, oauth_client_id=CLIENT_ID, oauth_client_secret=SECRET
    )
    emu.seed_repository("acme", "fleet", INSTALLATION)
    with emu:
        yield emu


def http(emulator: GitHubEmulator) -> httpx.Client:
    return httpx.Client(base_url=emulator.url, timeout=10, follow_redirects=False)


class FormReader(HTMLParser):
    """The inputs and buttons of a page's forms, as a browser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, str | None]] = []
        self.inputs: dict[str, dict[str, str | None]] = {}
        self.buttons: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append(found)
        elif tag == "input" and found.get("name"):
            self.inputs[str(found["name"])] = found
        elif tag == "button":
            self.buttons.append(found)


def read_form(page: str) -> FormReader:
    reader = FormReader()
    reader.feed(page)
    return reader


def exchange(client: httpx.Client, code: str, **extra: str) -> dict[str, Any]:
    fields = {"client_id": CLIENT_ID, "client_secret": SECRET, "code": code, **extra}
    answer = client.post(
        "/login/oauth/access_token", data=fields, headers={"Accept": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    result: dict[str, Any] = answer.json()
    return result


def test_the_whole_web_flow(emulator: GitHubEmulator) -> None:
    query = {
        "client_id": CLIENT_ID,
        "redirect_uri": CALLBACK,
        "state": "st4te",
        "login": "octo-cat",
    }
    with http(emulator) as client:
        page = client.get("/login/oauth/authorize", params=query)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        form = read_form(page.text)
        assert form.forms == [{"method": "post", "action": "/login/oauth/authorize"}]
        assert {k: v["value"] for k, v in form.inputs.items()} == query
        assert form.inputs["client_id"]["type"] == "hidden"
        assert form.inputs["login"]["type"] == "text"
        assert form.inputs["login"]["id"] == "login"
        assert [b["id"] for b in form.buttons] == ["authorize"]
        assert ">Authorize</button>" in page.text

        # the browser submits the form (the login as typed)
        posted = client.post(
            "/login/oauth/authorize", data={k: str(v["value"]) for k, v in form.inputs.items()}
        )
        assert posted.status_code == 302
        back = urllib.parse.urlsplit(posted.headers["location"])
        assert urllib.parse.urlunsplit(back._replace(query="")) == CALLBACK.split("?")[0]
        params = urllib.parse.parse_qs(back.query)
        assert params["next"] == ["/jobs"]  # the callback's own query is kept
        assert params["state"] == ["st4te"]
        (code,) = params["code"]

        token = exchange(client, code, redirect_uri=CALLBACK)
        assert token["access_token"].startswith("ghu_")
        assert token["refresh_token"].startswith("ghr_")
        assert token["expires_in"] == 28800
        assert token["token_type"] == "bearer"
        assert token["scope"] == ""
        assert isinstance(token["refresh_token_expires_in"], int)

        for scheme in ("Bearer", "token"):
            me = client.get("/user", headers={"Authorization": f"{scheme} {token['access_token']}"})
            assert me.status_code == 200, me.text
            assert me.json()["login"] == "octo-cat"
            assert me.json()["type"] == "User"
            assert me.json()["email"] is None
            assert isinstance(me.json()["id"], int)
        # the same login always has the same id (as in webhooks and the permission API)
        again = emulator.issue_user_token("octo-cat")
        me_again = client.get("/user", headers={"Authorization": f"Bearer {again}"})
        assert me_again.json()["id"] == me.json()["id"]

    paths = [(r.method, r.path, r.status) for r in emulator.requests()]
    assert ("GET", "/login/oauth/authorize", 200) in paths
    assert ("POST", "/login/oauth/authorize", 302) in paths
    assert ("POST", "/login/oauth/access_token", 200) in paths
    assert ("GET", "/user", 200) in paths


def test_the_control_endpoint_skips_the_browser_and_json_bodies_work(
    emulator: GitHubEmulator,
) -> None:
    with http(emulator) as client:
        made = client.post(
            "/_emulator/oauth/codes", json={"login": "mona", "redirect_uri": CALLBACK}
        )
        assert made.status_code == 201
        answer = client.post(
            "/login/oauth/access_token",
            json={"client_id": CLIENT_ID, "client_secret": SECRET, "code": made.json()["code"]},
            headers={"Accept": "application/json"},
        )
        token = answer.json()["access_token"]
        me = client.get("/user", headers={"Authorization": f"Bearer {token}"})
        assert me.json()["login"] == "mona"
        bad = client.post("/_emulator/oauth/codes", json={"login": "-no", "redirect_uri": "x"})
        assert bad.status_code == 400


def test_a_code_is_used_once(emulator: GitHubEmulator) -> None:
    code = emulator.issue_oauth_code("octocat", CALLBACK)
    with http(emulator) as client:
        assert exchange(client, code)["access_token"].startswith("ghu_")
        again = exchange(client, code)
    assert again["error"] == "bad_verification_code"
    assert again["error_description"] == "The code passed is incorrect or expired."
    assert again["error_uri"].startswith("https://docs.github.com/")
    assert "access_token" not in again


def test_wrong_client_credentials_keep_the_code(emulator: GitHubEmulator) -> None:
    code = emulator.issue_oauth_code("octocat", CALLBACK)
    with http(emulator) as client:
        wrong_secret = exchange(client, code, client_secret="guess")
        wrong_id = exchange(client, code, client_id="Iv1.other")
        assert wrong_secret["error"] == wrong_id["error"] == "incorrect_client_credentials"
        assert "guess" not in str(wrong_secret) and SECRET not in str(wrong_id)
        assert exchange(client, code)["access_token"].startswith("ghu_")


def test_redirect_uri_must_match_the_code(emulator: GitHubEmulator) -> None:
    code = emulator.issue_oauth_code("octocat", CALLBACK)
    with http(emulator) as client:
        other = exchange(client, code, redirect_uri="http://127.0.0.1:1/elsewhere")
        assert other["error"] == "redirect_uri_mismatch"
        assert exchange(client, code, redirect_uri=CALLBACK)["access_token"].startswith("ghu_")


def test_an_expired_code_is_refused(app_key: str) -> None:
    with GitHubEmulator(app_id=7, app_key=app_key, oauth_code_ttl=0.05) as emu:
        code = emu.issue_oauth_code("octocat", CALLBACK)
        time.sleep(0.2)
        with httpx.Client(base_url=emu.url, timeout=10) as client:
            answer = client.post(
                "/login/oauth/access_token",
                data={
                    "client_id": emu.oauth_client_id,
                    "client_secret": emu.oauth_client_secret,
                    "code": code,
                },
                headers={"Accept": "application/json"},
            )
        assert answer.json()["error"] == "bad_verification_code"


def test_default_credentials(app_key: str) -> None:
    one = GitHubEmulator(app_id=7, app_key=app_key)
    two = GitHubEmulator(app_id=7, app_key=app_key)
    assert one.oauth_client_id == "Iv1.emulator"
    assert len(one.oauth_client_secret) == 40
    assert one.oauth_client_secret != two.oauth_client_secret


def test_urlencoded_answer_without_accept_json(emulator: GitHubEmulator) -> None:
    code = emulator.issue_oauth_code("octocat", CALLBACK)
    with http(emulator) as client:
        fields = {"client_id": CLIENT_ID, "client_secret": SECRET, "code": code}
        answer = client.post("/login/oauth/access_token", data=fields)
        assert answer.headers["content-type"].startswith("application/x-www-form-urlencoded")
        token = dict(urllib.parse.parse_qsl(answer.text))
        assert token["access_token"].startswith("ghu_")
        assert token["token_type"] == "bearer"
        assert token["expires_in"] == "28800"
        refused = client.post("/login/oauth/access_token", data=fields)
        assert refused.status_code == 200
        assert dict(urllib.parse.parse_qsl(refused.text))["error"] == "bad_verification_code"


def test_installation_and_user_tokens_do_not_cross(emulator: GitHubEmulator) -> None:
    installation = emulator.issue_token(INSTALLATION)
    user = emulator.issue_user_token("octocat")
    with http(emulator) as client:
        me = client.get("/user", headers={"Authorization": f"token {installation}"})
        assert me.status_code == 403
        assert me.json()["message"] == "Resource not accessible by integration"
        repo = client.get("/repos/acme/fleet", headers={"Authorization": f"Bearer {user}"})
        assert repo.status_code == 404
        assert client.get(
            "/repos/acme/fleet", headers={"Authorization": f"token {installation}"}
        ).is_success
        bogus = client.get("/user", headers={"Authorization": "Bearer ghu_nope"})
        assert (bogus.status_code, bogus.json()["message"]) == (401, "Bad credentials")
        assert client.get("/user").status_code == 401


def test_the_authorize_page_escapes_what_it_is_given(emulator: GitHubEmulator) -> None:
    hostile = '"><script>alert(1)</script>'
    query = {"client_id": CLIENT_ID, "redirect_uri": CALLBACK, "state": hostile, "login": hostile}
    with http(emulator) as client:
        page = client.get("/login/oauth/authorize", params=query)
        assert page.status_code == 200
        assert "<script>" not in page.text
        form = read_form(page.text)
        assert form.inputs["state"]["value"] == hostile  # intact once unescaped
        # the state comes back to the callback exactly as given
        posted = client.post("/login/oauth/authorize", data={**query, "login": "octocat"})
        back = urllib.parse.parse_qs(urllib.parse.urlsplit(posted.headers["location"]).query)
        assert back["state"] == [hostile]


def test_bad_authorization_requests(emulator: GitHubEmulator) -> None:
    with http(emulator) as client:
        unknown = client.get(
            "/login/oauth/authorize", params={"client_id": "nope", "redirect_uri": CALLBACK}
        )
        assert unknown.status_code == 404
        assert unknown.headers["content-type"].startswith("text/html")
        missing = client.get("/login/oauth/authorize", params={"client_id": CLIENT_ID})
        assert missing.status_code == 400
        assert "redirect_uri" in missing.text
        script = client.get(
            "/login/oauth/authorize",
            params={"client_id": CLIENT_ID, "redirect_uri": "javascript:alert(1)"},
        )
        assert script.status_code == 400
        bad_login = client.post(
            "/login/oauth/authorize",
            data={"client_id": CLIENT_ID, "redirect_uri": CALLBACK, "login": "-bad"},
        )
        assert bad_login.status_code == 422
        assert "location" not in bad_login.headers
        empty_login = client.post(
            "/login/oauth/authorize",
            data={"client_id": CLIENT_ID, "redirect_uri": CALLBACK, "login": ""},
        )
        assert empty_login.status_code == 422
        posted_unknown = client.post(
            "/login/oauth/authorize",
            data={"client_id": "nope", "redirect_uri": CALLBACK, "login": "octocat"},
        )
        assert posted_unknown.status_code == 404


def test_get_app_reports_the_oauth_client_id(emulator: GitHubEmulator, app_key: str) -> None:
    now = int(time.time())
    bearer = jwt.encode({"iat": now - 60, "exp": now + 500, "iss": "7"}, app_key, "RS256")
    with http(emulator) as client:
        app = client.get("/app", headers={"Authorization": f"Bearer {bearer}"})
    assert app.json()["client_id"] == CLIENT_ID == emulator.oauth_client_id
    assert emulator.oauth_client_secret == SECRET
