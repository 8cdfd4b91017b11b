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
SCRIPT_ONLY = {"RSVC_ES_VERSION", "RSVC_ES_PORT", "RSVC_ES_HEAP", "RSVC_ES_CACHE", "RSVC_KEEP_ES"}


def documented() -> dict[str, str]:
    """``RSVC_*`` name → its default cell, from the tables of docs/configuration.md."""
    rows = re.findall(r"^\| `(RSVC_[A-Z0-9_]+)` \| ([^|]*) \|", DOC.read_text("utf-8"), re.M)
    return {name: cell.strip() for name, cell in rows if name not in SCRIPT_ONLY}


def default_of(name: str) -> Any:
    field = Settings.model_fields[name]
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return None if field.default is PydanticUndefined else field.default


def test_every_setting_is_documented_and_nothing_else() -> None:
    in_code = {f"RSVC_{name.upper()}" for name in Settings.model_fields}
    assert set(documented()) == in_code


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_documented_default_is_the_real_one(name: str) -> None:
    cell = documented()[f"RSVC_{name.upper()}"]
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
