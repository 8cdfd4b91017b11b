"""The documentation says what the code does: every setting is documented, with its default,
and nothing documented is missing from the code (datasette's test_docs habit)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import PydanticUndefined

from retrieval_svc.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
TWIN = DOC.with_name("configuration.zh-CN.md")  # (the Chinese page: the same settings, defaults)
SCRIPT_ONLY = {
    "RSVC_ES_VERSION",
    "RSVC_ES_PORT",
    "RSVC_ES_HEAP",
    "RSVC_ES_CACHE",
    "RSVC_KEEP_ES",
    "RSVC_TEST_WORKERS",
}


def documented(doc: Path = DOC) -> dict[str, str]:
    """``RSVC_*`` name → its default cell, from the tables of docs/configuration.md."""
    rows = re.findall(r"^\| `(RSVC_[A-Z0-9_]+)` \| ([^|]*) \|", doc.read_text("utf-8"), re.M)
    return {name: cell.strip() for name, cell in rows if name not in SCRIPT_ONLY}


def default_of(name: str) -> Any:
    field = Settings.model_fields[name]
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return None if field.default is PydanticUndefined else field.default


@pytest.mark.parametrize("doc", [DOC, TWIN], ids=["en", "zh-CN"])
def test_every_setting_is_documented_and_nothing_else(doc: Path) -> None:
    in_code = {f"RSVC_{name.upper()}" for name in Settings.model_fields}
    assert set(documented(doc)) == in_code


@pytest.mark.parametrize("doc", [DOC, TWIN], ids=["en", "zh-CN"])
@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_documented_default_is_the_real_one(name: str, doc: Path) -> None:
    cell = documented(doc)[f"RSVC_{name.upper()}"]
    default = default_of(name)
    if default is None:
        assert cell.startswith("—"), cell
    elif isinstance(default, bool):
        assert cell == f"`{str(default).lower()}`", cell
    elif isinstance(default, int | float):
        assert float(cell.strip("`")) == default, cell
    elif isinstance(default, str):
        assert f"`{default}`" in cell or (default == "" and cell == '`""`'), cell
    elif isinstance(default, list | dict):
        assert cell == f"`{json.dumps(default, ensure_ascii=False).replace(', ', ', ')}`", cell
    else:  # paths of packaged files: described in words
        assert cell, name


ROOT = DOC.parents[1]


def layout_rows() -> list[str]:
    """The first cells of the Layout table (docs/layout.md)."""
    section = (ROOT / "docs" / "layout.md").read_text("utf-8")
    return re.findall(r"^\| (`[^|]+`) \|", section, re.M)


def test_the_layout_table_matches_the_tree() -> None:
    named: set[str] = set()
    for cell in layout_rows():
        paths = re.findall(r"`([^`]+)`", cell)
        base = ""
        for path in paths:  # `retrieval_svc/app.py`, `state.py`: later names share the folder
            if "/" in path.rstrip("/"):
                base = path.rstrip("/").rsplit("/", 1)[0] + "/"
                full = path
            else:
                full = base + path
            assert (ROOT / full).exists(), f"the Layout table names {full}, which does not exist"
            named.add(full.rstrip("/"))
    package = ROOT / "retrieval_svc"
    modules = {
        f"retrieval_svc/{p.name}"
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()
    }
    missing = sorted(m for m in modules if m not in named)
    assert not missing, f"docs/layout.md does not mention {missing}"


def test_every_identity_mode_is_documented() -> None:
    from retrieval_svc.key_entry import ApiKeyConfig, IdentityMode

    text = DOC.read_text("utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `mode` |"))
    assert {m.value for m in IdentityMode} == set(re.findall(r"`([a-z]+)`", row)) - {"mode"}, row
    fields = set(re.findall(r"^\| `([a-z_0-9]+)` \|", text.split("### API key entries")[1], re.M))
    assert set(ApiKeyConfig.model_fields) <= fields, set(ApiKeyConfig.model_fields) - fields
