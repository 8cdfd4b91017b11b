"""The operator's console in a real headless Chromium (issue #28 §3): sign in, *Search as*
two users of the seed's access table, *Why not*, a policy edit that reaches *Search as*
without a restart, *Audit*; refusals; screenshots of each page to docs/console/."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from retrieval_svc.audit import audit_prefix
from retrieval_svc.auth.keys import hash_key
from retrieval_svc.search.runs import runs_index
from tests.support import ES_URL, KEYS
from tests.support.corpus import SAMPLES_KB, own, store_chunks
from tests.support.live import live_service, serve_env

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "console"
POLICY = (
    "p, anyone, acme, *, read\ng, 物业经理, 运维工程师, acme\n"
    # Another tenant's rule, and a global one: acme's Policy page lists the second only.
    "p, anyone, globex, globex-secret-kb, read\np, anyone, *, every-tenant-handbook, read\n"
)
POWER = "配电房设备参数与操作规程"  # 运维工程师, 物业经理
RESTRICTED = {POWER, "消防控制室值班制度", "物业费用与合同管理制度", "电梯维保记录规范"}
QUESTION = "配电房 消防 物业费 电梯 巡更 访客 巡检 操作 规程 制度"


DB_OF: dict[str, str] = {}  # a console's URL → its policy database


@pytest.fixture(scope="module")
def console(corpus: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``retrieval-svc serve`` with the console, the policy in a SQLite database, and the
    audit trail in Elasticsearch."""
    folder = tmp_path_factory.mktemp("console")
    keys = folder / "keys.json"
    keys.write_text(json.dumps([
        {"name": "admin", "sha256": hash_key(KEYS["anon"]), "tenant": "acme", "admin": True},
        {"name": "plain", "sha256": hash_key(KEYS["ops"]), "tenant": "acme"},
    ]))  # fmt: skip
    (folder / "policy.csv").write_text(POLICY, encoding="utf-8")
    db = f"sqlite:///{folder / 'policy.db'}"
    env = serve_env(
        corpus,
        keys,
        RSVC_CONSOLE="true",
        RSVC_AUDIT="elasticsearch",
        RSVC_CASBIN_DB_URL=db,
        RSVC_POLICY_CHECK_INTERVAL_S="0.2",
    )
    cli = ["-c", "from retrieval_svc.cli import app; app()"]
    subprocess.run(
        [sys.executable, *cli, "policy", "import", str(folder / "policy.csv")],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    try:
        with live_service(env, folder) as (url, _child):
            DB_OF[url] = db
            yield url
    finally:
        es = Elasticsearch(ES_URL)
        es.options(ignore_status=404).indices.delete(index=f"{audit_prefix(corpus)}*")
        es.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    found = subprocess.run(
        [str(ROOT / "scripts" / "chromium.sh")], capture_output=True, text=True, timeout=900
    )
    if found.returncode != 0:
        pytest.fail(f"no headless Chromium: {found.stderr}", pytrace=False)
    binary, driver = found.stdout.split()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--lang=zh-CN"):  # fmt: skip
        options.add_argument(argument)
    options.add_experimental_option("prefs", {"intl.accept_languages": "zh-CN,zh"})
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.set_page_load_timeout(60)
    yield chrome
    chrome.quit()


def submit(chrome: webdriver.Chrome, button: Any) -> None:
    """Click a form's button and wait until the next page has loaded.

    The old document is marked (a property on its window, which a navigation replaces), and
    the wait is for a complete document without the mark. Asking the old ``<html>`` whether
    it went stale can answer, mid-navigation on a busy machine, with an inspector error
    ("Node with given id does not belong to the document") that ``staleness_of`` does not
    catch (issue #39); every WebDriver error while the page changes is transient here.
    """
    chrome.execute_script("window.__rsvcLeaving = true")
    button.click()
    wait = WebDriverWait(chrome, 60, ignored_exceptions=(WebDriverException,))
    wait.until(
        lambda c: c.execute_script(
            "return window.__rsvcLeaving === undefined && document.readyState === 'complete'"
        )
    )


def sign_in(http: httpx.Client, key: str) -> httpx.Response:
    """Sign in as a browser does: the sign-in form first (its login-CSRF token and cookie)."""
    form = http.get("/console/login")
    token: Any = re.search(r'name="login_csrf" value="([^"]+)"', form.text)
    assert form.status_code == 200 and token is not None, form.text[:300]
    return http.post("/console/login", data={"key": key, "login_csrf": token.group(1)})


def form_token(http: httpx.Client, path: str = "/console/search") -> str:
    """The CSRF token of a signed-in page's forms."""
    found: Any = re.search(r'name="csrf" value="([^"]+)"', http.get(path).text)
    assert found is not None, path
    return str(found.group(1))


def fill(chrome: webdriver.Chrome, **fields: str) -> None:
    for name, value in fields.items():
        element = chrome.find_element(By.NAME, name)
        element.clear()
        element.send_keys(value)


def shot(chrome: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    chrome.save_screenshot(str(SHOTS / f"{name}.png"))


def titles(chrome: webdriver.Chrome, table: str) -> set[str]:
    rows = chrome.find_elements(By.CSS_SELECTOR, f"#{table} tr td:nth-child(2)")
    found = {re.sub(r" v[\d.]+$", "", r.text) for r in rows} if table == "results" else set()
    if table == "hidden":
        found = {r.text for r in chrome.find_elements(By.CSS_SELECTOR, "#hidden tr td:first-child")}
    return found


def search_as(chrome: webdriver.Chrome, base: str, **who: str) -> tuple[set[str], set[str]]:
    chrome.get(f"{base}/console/search")
    fill(chrome, user_id=who.get("user_id", ""), roles=who.get("roles", ""), query=QUESTION,
         knowledge_ids=SAMPLES_KB)  # fmt: skip
    submit(chrome, chrome.find_element(By.ID, "search"))
    return titles(chrome, "results"), titles(chrome, "hidden")


def test_the_console_in_a_browser(
    console: str, browser: webdriver.Chrome, es_sync: Elasticsearch, corpus: str
) -> None:
    chrome = browser
    chrome.get(f"{console}/console/search")
    assert chrome.current_url.endswith("/console/login")  # not signed in: the sign-in page
    shot(chrome, "login")
    fill(chrome, key=KEYS["anon"])
    submit(chrome, chrome.find_element(By.ID, "sign-in"))
    assert chrome.current_url.endswith("/console/search"), re.sub(r"\s+", " ", chrome.page_source)[
        -1500:
    ]
    assert "以用户身份检索" in chrome.page_source  # Chinese, from Accept-Language

    # Search as: the seed's access table, and what is hidden from whom.
    cleaner, hidden = search_as(chrome, console, roles="保洁主管")
    assert cleaner and not cleaner & RESTRICTED, cleaner
    assert POWER in hidden, (hidden, re.sub(r"\s+", " ", chrome.page_source)[-3000:])
    manager, _ = search_as(chrome, console, roles="物业经理")
    assert POWER in manager and "电梯维保记录规范" in manager  # (物业经理 → 运维工程师)
    shot(chrome, "search")

    # Why not: 配电房 for 保洁主管.
    document = es_sync.search(
        index=own(corpus), query={"term": {"document_title.keyword": POWER}}, size=1
    )["hits"]["hits"][0]["_source"]["document_id"]
    chrome.get(f"{console}/console/why-not")
    fill(chrome, roles="保洁主管")
    picker = Select(chrome.find_element(By.NAME, "document_id"))  # picked by its title
    picker.select_by_visible_text(f"{POWER} · {SAMPLES_KB}")
    assert picker.first_selected_option.get_attribute("value") == document
    submit(chrome, chrome.find_element(By.ID, "explain"))
    explained = chrome.find_element(By.ID, "explained").text
    assert "受限：用户不持有段落所列任何角色" in explained  # (the page's language, issue #36 §6)
    assert "restricted" not in explained and "policy grants" not in explained
    assert "运维工程师" in explained and "物业经理" in explained
    shot(chrome, "why-not")

    # Policy: a grant in the database reaches Search as at once.
    before, _ = search_as(chrome, console, user_id="zhao")
    assert POWER not in before
    assert "混合（字词与语义）" in chrome.page_source  # (the search modes in Chinese too)
    chrome.get(f"{console}/console/policy")
    form = chrome.find_element(By.ID, "form-grant-role")
    form.find_element(By.NAME, "user").send_keys("zhao")
    form.find_element(By.NAME, "role").send_keys("物业经理")
    submit(chrome, form.find_element(By.TAG_NAME, "button"))
    assert "zhao" in chrome.find_element(By.ID, "users").text
    # ... and is in the history, with the admin who made it (issue #35 §4).
    changes = chrome.find_element(By.ID, "history").text
    # (who acted, in the page's language: the browser asks for Chinese; issue #58 §3)
    assert "控制台 admin" in changes and "user:zhao → 物业经理" in changes, changes
    shot(chrome, "policy")
    after, _ = search_as(chrome, console, user_id="zhao")
    assert POWER in after

    # A request Dify would show as an empty answer: listed with its key and reason.
    misbound = {
        "knowledge_id": SAMPLES_KB,
        "query": "巡更",
        "retrieval_setting": {"top_k": 3, "score_threshold": 0.0},
        "metadata_condition": {"logical_operator": "and", "conditions": [
            {"name": "user_id", "comparison_operator": "is", "value": "{{sys.user_id}}"}]},
    }  # fmt: skip
    refused = httpx.post(
        f"{console}/retrieval", json=misbound, headers={"Authorization": f"Bearer {KEYS['ops']}"}
    )
    assert refused.status_code == 400, refused.text
    chrome.get(f"{console}/console/knowledge-bases")
    assert SAMPLES_KB in chrome.find_element(By.ID, "kbs").text
    row = chrome.find_element(By.CSS_SELECTOR, '#refusals tr[data-reason="template_identity"]')
    assert "plain" in row.text and "身份是未被解析的 Dify 变量" in row.text, row.text
    shot(chrome, "knowledge-bases")

    # Audit: the searches just made (the console's own, recorded like any retrieval).
    for _ in range(120):  # the trail is written in the background, within a second or so
        chrome.get(f"{console}/console/audit?user=zhao&since=1h")
        if len(chrome.find_elements(By.CSS_SELECTOR, "#events tr")) >= 3:
            break
        time.sleep(0.5)
    events = chrome.find_element(By.ID, "events").text
    assert "/console/search" in events and SAMPLES_KB in events
    shot(chrome, "audit")


def test_refusals(console: str) -> None:
    with httpx.Client(base_url=console, timeout=30) as http:
        plain = sign_in(http, KEYS["ops"])
        assert plain.status_code == 403 and "rsvc_console" not in plain.cookies
        signed = sign_in(http, KEYS["anon"])
        assert signed.status_code == 303
        page = http.get("/console/search")
        assert page.status_code == 200 and "script" not in page.headers["content-security-policy"]
        csrf = form_token(http)
        without = http.post("/console/search", data={"roles": "x", "query": "q",
                                                     "knowledge_ids": SAMPLES_KB})  # fmt: skip
        assert without.status_code == 403
        forged = http.post("/console/search", data={"csrf": "0" * 64, "query": "q",
                                                    "knowledge_ids": SAMPLES_KB})  # fmt: skip
        assert forged.status_code == 403
        ok = http.post("/console/search", data={"csrf": csrf, "query": "巡更",
                                                "knowledge_ids": SAMPLES_KB})  # fmt: skip
        assert ok.status_code == 200
        cookie = signed.cookies.get("rsvc_console")
        assert cookie and "httponly" in signed.headers["set-cookie"].lower()
        assert "samesite=strict" in signed.headers["set-cookie"].lower()


def test_signing_out_ends_the_session_on_the_server(console: str) -> None:
    # Issue #36 §4: a cookie copied before Sign out opened every page for its 30 minutes.
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        copied = http.cookies.get("rsvc_console")
        csrf = form_token(http)
        forged = http.post("/console/logout", data={"csrf": "0" * 64})
        assert forged.status_code == 403  # another site cannot sign the operator out
        assert http.get("/console/search").status_code == 200  # and the session lives on
        out = http.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert "samesite=strict" in out.headers["set-cookie"].lower()
    with httpx.Client(base_url=console, timeout=30, cookies={"rsvc_console": copied}) as replay:
        again = replay.get("/console/search")
    assert again.status_code == 303 and again.headers["location"] == "/console/login"


def test_search_as_is_the_operator_acting_not_the_user(console: str) -> None:
    # Issue #36 §3: Search as was recorded as the user's own retrieval.
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        csrf = form_token(http)
        form = {"csrf": csrf, "user_id": "audited-li", "query": "巡更",
                "knowledge_ids": SAMPLES_KB}  # fmt: skip
        assert http.post("/console/search", data=form).status_code == 200
        deadline = time.monotonic() + 60
        while True:
            trail = http.get("/console/audit", params={"user": "audited-li", "since": "1h"})
            if "console:admin" in trail.text or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        mine = http.get("/console/audit", params={"actor": "key:admin", "user": "audited-li"})
    rows = trail.text.split('id="events"', 1)
    assert len(rows) == 2 and "console:admin" in rows[1] and "audited-li" in rows[1], trail.text
    assert 'id="events"' not in mine.text  # nothing by the key itself for that subject


def test_a_chunk_stored_for_a_user_breaks_no_page(
    console: str, corpus: str, es_sync: Elasticsearch
) -> None:
    # Issue #36 §6: one chunk with access_roles ["user:alice"] (the indexer now refuses it;
    # another writer may not) made every Search as of its tenant fail.
    store_chunks(es_sync, corpus, SAMPLES_KB, {"stray-user-chunk": {
        "content": "巡更 记录 孤立", "access_roles": ["user:alice"]}})  # fmt: skip
    try:
        with httpx.Client(base_url=console, timeout=30) as http:
            assert sign_in(http, KEYS["anon"]).status_code == 303
            csrf = form_token(http)
            form = {"csrf": csrf, "roles": "物业经理", "query": "巡更",
                    "knowledge_ids": SAMPLES_KB}  # fmt: skip
            answer = http.post("/console/search", data=form)
        assert answer.status_code == 200 and 'id="results"' in answer.text, answer.text[-500:]
        assert "may not name a user" not in answer.text and "stray-user-chunk" not in answer.text
    finally:
        es_sync.delete(index=own(corpus, "acme"), id="stray-user-chunk", refresh=True)


def test_the_policy_page_marks_directory_roles_and_skipped_lines(console: str) -> None:
    import sqlalchemy

    from retrieval_svc.acl import owned
    from retrieval_svc.acl.policy_store import TABLE

    engine = sqlalchemy.create_engine(DB_OF[console])
    owned.ensure_table(engine)
    with engine.begin() as conn:  # as sync-ldap leaves them: a role it owns, and an old bad row
        owned.replace_in(conn, "acme", "sync-ldap", ["目录角色"])
        conn.execute(
            sqlalchemy.text(
                f"INSERT INTO {TABLE} (ptype, v0, v1, v2) VALUES ('g', :a, :b, 'acme')"
            ),
            [{"a": "user:zhou", "b": "bad\nrole"}, {"a": "user:zhou-sync", "b": "目录角色"}],
        )
    try:
        with httpx.Client(base_url=console, timeout=30) as http:
            assert sign_in(http, KEYS["anon"]).status_code == 303
            csrf = form_token(http, "/console/policy")
            form = {"csrf": csrf, "action": "grant-role", "user": "zhou", "role": "目录角色"}
            refused = http.post("/console/policy", data=form, headers={"Accept-Language": "zh-CN"})
        assert refused.status_code == 200
        # The refusal in the page's language, whatever the server's terminal speaks.
        assert "归目录同步 'sync-ldap' 所有" in html.unescape(refused.text), refused.text
        assert 'id="lines-skipped">1 条本租户的策略记录无法解读' in refused.text
        assert (
            '目录角色 <span class="muted owned">(由目录同步授予 sync-ldap)</span>: zhou-sync'
            in refused.text
        )
    finally:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text(f"DELETE FROM {TABLE} WHERE v0 LIKE 'user:zhou%'"))
            owned.replace_in(conn, "acme", "sync-ldap", [])
        engine.dispose()


def test_an_id_that_names_no_one_shows_in_the_console(console: str) -> None:
    # Design §17: a Dify user id nobody resolves is listed with the key that sent it, and
    # Why not says the id names no one.
    body = {
        "knowledge_id": SAMPLES_KB,
        "query": "配电房",
        "retrieval_setting": {"top_k": 3, "score_threshold": 0},
        "metadata_condition": {"logical_operator": "and", "conditions": [
            {"name": "user_id", "comparison_operator": "is", "value": "3f6c1a9e-dify-visitor"}]},
    }  # fmt: skip
    asked = httpx.post(
        f"{console}/retrieval", json=body, headers={"Authorization": f"Bearer {KEYS['ops']}"}
    )
    assert asked.status_code == 200, asked.text
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        zh = {"Accept-Language": "zh-CN"}
        page = http.get("/console/policy", headers=zh).text
        listed: Any = re.search(r'<table id="unknown-users">(.*?)</table>', page, re.S)
        assert listed and "3f6c1a9e-dify-visitor" in listed[1] and "plain" in listed[1], page
        form = {"csrf": form_token(http, "/console/why-not"), "user_id": "3f6c1a9e-dify-visitor",
                "roles": "", "document_id": "-"}  # fmt: skip
        why = http.post("/console/why-not", data=form, headers=zh).text
    assert 'id="identity">用户 ID: 无法对应到任何人' in why, why[-800:]


def test_a_refused_policy_change_still_shows_the_policy(console: str) -> None:
    # Issue #36 §6: after "role 'HR' cannot inherit itself" the lists were empty and the page
    # said the policy was a read-only file.
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        before = http.get("/console/policy", headers={"Accept-Language": "en"})
        csrf = form_token(http, "/console/policy")
        refused = http.post(
            "/console/policy",
            data={"csrf": csrf, "action": "inherit", "role": "HR", "parent": "HR"},
            headers={"Accept-Language": "en"},
        )
        link = {"csrf": csrf, "role": "临时角色", "parent": "巡检员"}
        added = http.post("/console/policy", data={**link, "action": "inherit"})
        removed = http.post("/console/policy", data={**link, "action": "disinherit"})
    assert refused.status_code == 200 and "cannot inherit itself" in refused.text
    assert "read-only" not in refused.text and 'id="form-disallow"' in refused.text
    for listed in ("物业经理 → 运维工程师", "every-tenant-handbook"):
        assert listed in before.text and listed in refused.text, listed

    def inherits(page: httpx.Response) -> str:
        found: Any = re.search(r'<ul id="inherits">(.*?)</ul>', page.text, re.S)
        return str(found[1])

    assert "临时角色 → 巡检员" in inherits(added) and "临时角色 → 巡检员" not in inherits(removed)
    # The history shows both, newest first, with who made them (issue #35 §4).
    assert removed.text.index("- 临时角色 → 巡检员") < removed.text.index("+ 临时角色 → 巡检员")


def test_signing_in_needs_the_form_s_token(console: str) -> None:
    # Login CSRF: another site's form cannot sign a browser in with a key of its choosing.
    with httpx.Client(base_url=console, timeout=30) as http:
        bare = http.post("/console/login", data={"key": KEYS["anon"]})
        assert bare.status_code == 403 and "rsvc_console" not in bare.cookies
        http.get("/console/login")  # the cookie alone, without the form's token
        forged = http.post("/console/login", data={"key": KEYS["anon"], "login_csrf": "0" * 64})
        assert forged.status_code == 403 and "rsvc_console" not in forged.cookies


def test_every_console_answer_has_the_security_headers(console: str) -> None:
    with httpx.Client(base_url=console, timeout=30) as http:
        answers = {
            "404": http.get("/console/no-such-page"),
            "405": http.put("/console/search"),
            "redirect": http.get("/console"),
            "stylesheet": http.get("/console/static/console.css"),
            "sign-in": http.get("/console/login"),
        }
    for what, resp in answers.items():
        assert resp.headers.get("content-security-policy", "").startswith("default-src 'none'"), (
            what
        )
        assert resp.headers.get("x-content-type-options") == "nosniff", what
        assert resp.headers.get("x-frame-options") == "DENY", what
    assert answers["404"].status_code == 404 and answers["405"].status_code == 405


def test_hostile_page_parameters_are_errors_on_the_page_not_500s(console: str) -> None:
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        for since in ("99999999999d", "abc", "9" * 5000 + "d", "0d", "-3d", "7w"):
            page = http.get("/console/audit", params={"since": since})
            assert page.status_code == 200, (since, page.status_code)
            assert "is not a span such as 30m, 12h or 7d" in page.text, since
        assert http.get("/console/audit", params={"since": "12h"}).status_code == 200
        csrf = form_token(http, "/console/policy")
        for form in ({"action": "grant-role"}, {"action": "inherit", "role": "r"}, {}):
            page = http.post("/console/policy", data={"csrf": csrf, **form})
            assert page.status_code == 200, (form, page.status_code)
            assert "required for" in page.text or "unknown change" in page.text, form


def test_the_policy_page_lists_its_tenant_s_rules_by_equality(console: str) -> None:
    # Issue #36 §2: the page once listed every rule whose tenant contained "*".
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        page = http.get("/console/policy")
    assert page.status_code == 200
    assert "every-tenant-handbook" in page.text and "globex-secret-kb" not in page.text


def test_a_console_request_s_access_log_names_its_key_and_tenant(
    corpus: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue #36 §3: a console POST's access-log line named no key (a grant had no author).
    import logging

    import anyio

    from tests.support import app_client, key_entry, make_settings

    settings = make_settings(
        corpus, console=True, api_keys=[key_entry("anon", tenant="acme", admin=True)]
    )

    async def work() -> None:
        async with app_client(settings) as c:
            form = await c.get("/console/login")
            token: Any = re.search(r'name="login_csrf" value="([^"]+)"', form.text)
            data = {"key": KEYS["anon"], "login_csrf": token.group(1)}
            assert (await c.post("/console/login", data=data)).status_code == 303
            page = await c.get("/console/search")
            csrf: Any = re.search(r'name="csrf" value="([^"]+)"', page.text)
            form_data = {"csrf": csrf.group(1), "query": "巡更", "knowledge_ids": SAMPLES_KB}
            assert (await c.post("/console/search", data=form_data)).status_code == 200

    caplog.set_level(logging.INFO, logger="rsvc.access")
    anyio.run(work)
    lines = [r.fields for r in caplog.records if r.name == "rsvc.access"]  # type: ignore[attr-defined]
    posted = [f for f in lines if f.get("method") == "POST" and f.get("route") == "/console/search"]
    assert posted, lines
    assert posted[0]["key"] == "anon" and posted[0]["tenant"] == "acme", posted[0]
    assert posted[0]["actor"] == "console:anon"


def test_no_console_when_it_is_off(corpus: str) -> None:
    import anyio

    from tests.support import app_client, make_settings

    async def probe() -> int:
        async with app_client(make_settings(corpus)) as c:
            return (await c.get("/console/login")).status_code

    assert anyio.run(probe) == 404


def test_knowledge_bases_shows_what_the_last_run_could_not_index(
    console: str, corpus: str, tmp_path: Path
) -> None:
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "坏的报表.pdf").write_bytes(b"%PDF-1.7 not really a pdf" + os.urandom(64))
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    args = ["index", str(folder), "--knowledge-id", SAMPLES_KB, "--tenant", "acme"]
    try:
        result = CliRunner().invoke(indexer_cli, args, env=env)
        assert result.exit_code == 1, result.output  # a document failed
        with httpx.Client(base_url=console, timeout=30) as http:
            assert sign_in(http, KEYS["anon"]).status_code == 303
            page = http.get("/console/knowledge-bases", headers={"Accept-Language": "zh-CN"})
        assert page.status_code == 200
        failures = page.text.split(f'id="failures-{SAMPLES_KB}"', 1)
        assert len(failures) == 2, "no failures table for the knowledge base"
        assert "坏的报表.pdf" in failures[1] and "最近一次运行未能索引的文档" in page.text
        # The reason in the page's language, its code beside it (issue #48 §5).
        assert 'data-code="office_unreadable"' in failures[1]
        assert "文件无法读取" in failures[1] and "重新保存或导出" in failures[1]
        assert "0 / 1 失败" in page.text  # the last run: none indexed, one failed
    finally:
        es = Elasticsearch(ES_URL)
        es.options(ignore_status=404).indices.delete(index=runs_index(corpus, "acme"))
        es.close()


def test_knowledge_bases_shows_a_run_over_shards_as_one(
    console: str, corpus: str, tmp_path: Path
) -> None:
    # Issue #49 §1: shard 0 of 2 ran, shard 1 did not: one run, half reported, shard 1 named.
    folder = tmp_path / "share"
    folder.mkdir()
    for i in range(6):
        (folder / f"制度-{i}.md").write_text(f"# 制度 {i}\n\n第 {i} 条。", encoding="utf-8")
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    args = ["index", str(folder), "--knowledge-id", "sharded", "--tenant", "acme", "--json"]
    try:
        result = CliRunner().invoke(indexer_cli, [*args, "--shard", "0/2"], env=env)
        assert result.exit_code == 0, result.output
        assert 0 < json.loads(result.stdout)["documents_seen"] < 6  # its own share only
        with httpx.Client(base_url=console, timeout=30) as http:
            assert sign_in(http, KEYS["anon"]).status_code == 303
            page = http.get("/console/knowledge-bases", headers={"Accept-Language": "zh-CN"})
        assert page.status_code == 200
        assert "1/2 个分片已报告 · 缺少分片记录 1" in page.text, page.text
    finally:
        gone = ["delete", "--knowledge-id", "sharded", "--tenant", "acme", "--yes"]
        assert CliRunner().invoke(indexer_cli, gone, env=env).exit_code == 0
        es = Elasticsearch(ES_URL)
        es.options(ignore_status=404).indices.delete(index=runs_index(corpus, "acme"))
        es.close()


def test_the_documents_page_shows_a_parse_as_stored(
    console: str, browser: webdriver.Chrome, corpus: str, tmp_path: Path
) -> None:
    # Issue #34 §4: a scanned page, a spreadsheet and a refused file, indexed through the CLI;
    # the Documents page lists them with their format, pages and pages read by OCR, the
    # failure with its reason, and a document's chunks as stored with the OCR mark.
    from bench.formats import render

    sections = [("设备台账", "变压器T-02的型号为SCB13-800，额定容量800 kVA，每两周巡检一次。")]
    folder = tmp_path / "bucket"
    folder.mkdir()
    (folder / "扫描件.png").write_bytes(render.png(sections))
    (folder / "台账.xlsx").write_bytes(render.xlsx(sections))
    (folder / "旧文档.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512))
    kb = "scans"
    env = {"RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus, "RSVC_EMBEDDER": "none"}
    args = ["index", str(folder), "--knowledge-id", kb, "--tenant", "acme"]
    result = CliRunner().invoke(indexer_cli, args, env=env)
    assert result.exit_code == 1, result.output  # the .doc failed, the rest went in
    chrome = browser
    chrome.get(f"{console}/console/login")
    if chrome.current_url.endswith("/console/login"):
        fill(chrome, key=KEYS["anon"])
        submit(chrome, chrome.find_element(By.ID, "sign-in"))
    chrome.get(f"{console}/console/knowledge-bases")
    submit(chrome, chrome.find_element(By.LINK_TEXT, kb))
    listing = chrome.find_element(By.ID, "documents").text
    assert "扫描件.png" in listing and "台账.xlsx" in listing and "xlsx" in listing
    row = next(
        r for r in chrome.find_elements(By.CSS_SELECTOR, "#documents tr") if "扫描件" in r.text
    )
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1:5] == ["png", "1", "1", "1"]  # format, pages, by OCR, chunks
    failures = chrome.find_element(By.ID, "failures")  # (in the browser's language, coded)
    assert 'data-code="libreoffice_failed"' in str(failures.get_attribute("innerHTML"))
    assert "LibreOffice" in failures.text
    submit(chrome, row.find_element(By.TAG_NAME, "a"))
    chunk = chrome.find_element(By.CSS_SELECTOR, "#chunks tr:nth-child(2)")
    text = [c.text for c in chunk.find_elements(By.TAG_NAME, "td")]
    assert text[0] == "1" and "SCB13-800" in text[2] and text[3] == "公开"
    assert 0.8 < float(text[4].split()[0]) <= 1.0  # the OCR confidence, as stored
    shot(chrome, "documents")
    with httpx.Client(base_url=console, timeout=30) as http:
        assert sign_in(http, KEYS["anon"]).status_code == 303
        for params in ({}, {"kb": "nope"}, {"kb": kb, "document": "x" * 5000}):
            page = http.get("/console/documents", params=params)
            assert page.status_code == 200, (params, page.status_code)
