"""The listing a watcher keeps for its next start (``indexer.watch.last_listing``): what
differs is found by stamps alone, and a record that cannot be trusted is never used."""

from __future__ import annotations

import base64
import os
import zlib
from pathlib import Path

import pytest

from indexer.permissions.rules import parse_rules
from indexer.watch import last_listing
from indexer.watch.last_listing import changed, rules_from, rules_record, walk


def files(root: Path, *keys: str) -> None:
    for key in keys:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(key, encoding="utf-8")


def test_what_changed_is_named_by_its_document_and_its_folder(tmp_path: Path) -> None:
    files(tmp_path, "a/one.md", "a/two.md", "a/old/three.md", "b/four.md", "b/five.md")
    before = walk(tmp_path)
    assert before is not None and before.files == 5
    (tmp_path / "a/two.md").rename(tmp_path / "b/two.md")  # a move
    (tmp_path / "a/old/three.md").unlink()
    (tmp_path / "a/old").rmdir()  # a folder gone
    files(tmp_path, "b/four.md.meta.json", "c/new.md")  # a sidecar; a new folder
    os.utime(tmp_path / "b/five.md", ns=(1, 1))  # touched in place
    now = walk(tmp_path)
    assert now is not None
    keys = changed(before, now)
    assert keys == {"a/two.md", "b/two.md", "a/old", "b/four.md", "c", "b/five.md"}
    assert changed(now, now) == set()


def test_a_file_copied_in_with_its_old_time_and_size_is_a_change(tmp_path: Path) -> None:
    files(tmp_path, "a/one.md")
    before = walk(tmp_path)
    st = (tmp_path / "a/one.md").stat()
    (tmp_path / "a/one.md").write_text("a/two.md", encoding="utf-8")  # (same size)
    os.utime(tmp_path / "a/one.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    now = walk(tmp_path)
    assert before is not None and now is not None
    assert changed(before, now) == {"a/one.md"}  # (its change time moved)


def test_another_folder_s_listing_is_not_compared(tmp_path: Path) -> None:
    files(tmp_path, "x/a.md", "y/a.md")
    x, y = walk(tmp_path / "x"), walk(tmp_path / "y")
    assert x is not None and y is not None
    assert changed(x, y) is None


def test_a_rules_file_is_kept_as_it_judges() -> None:
    rules = parse_rules(
        "unmatched: refuse\ncase: insensitive\nexclude: ['**/*.tmp']\nrules:\n"
        "  - match: 法务/**\n    access_roles: [法务]\n    override: true\n",
        "rules.yaml",
    )
    back = rules_from(rules_record(rules), "rules.yaml")
    assert back is not None and back.fingerprint() == rules.fingerprint()
    assert back.rule_for("法务/a.md") is not None and back.exclude == rules.exclude
    assert rules_from(None, "") is None


def kept(listing: bytes, **more: object) -> dict[str, object]:
    """A record as a watcher keeps it, holding ``listing`` (JSON before compression)."""
    packed = base64.b64encode(zlib.compress(listing)).decode()
    return {"kind": "watch-state", "root": "/", "device": 1, "inode": 2, "listing": packed, **more}


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({**kept(b"{}"), "listing": "not base64!"}, id="not-base64"),
        pytest.param(kept(b"[1, 2]"), id="not-an-object"),
        pytest.param(kept(b"{}" + b" " * 10**5), id="a-zip-bomb"),
        pytest.param(kept(b'{"a": ["x", {"f": 1}]}'), id="a-stamp-not-text"),
        pytest.param(kept(b"{}", device="1"), id="which-folder-not-readable"),
        pytest.param({**kept(b"{}"), "kind": "lease"}, id="another-kind"),
        pytest.param(
            kept(b"{}", rules={"unmatched": "everyone", "case": "sensitive"}),
            id="rules-not-readable",
        ),
    ],
)
def test_a_record_that_cannot_be_read_is_refused(
    record: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(last_listing, "MAX_RAW", 10_000)
    assert last_listing._parse(kept(b'{"": ["1-2", {"a.md": "3"}]}')).listing.files == 1
    with pytest.raises((ValueError, KeyError, TypeError)):
        last_listing._parse(record)


def tiny_entries(files: int, folders: int = 1) -> bytes:
    """A listing of ``files`` files spread over ``folders`` folders, each entry as small as
    JSON allows (what a record forged to inflate into millions of entries holds)."""
    each = -(-files // folders)
    names = [f'"{i:x}":""' for i in range(each)]
    body = ",".join(f'"{f:x}":["",{{{",".join(names)}}}]' for f in range(folders))
    return ("{" + body + "}").encode()


@pytest.mark.parametrize(("files", "folders"), [(41, 1), (3, 41), (144, 12)])
def test_a_record_of_more_entries_than_a_listing_keeps_is_refused_before_it_is_parsed(
    files: int, folders: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing of more files (or folders) than ``walk`` keeps is forged: refused (the start
    re-lists whole), and refused by counting, before it is parsed into memory (4 million tiny
    entries inflate from 11 MiB into 0.8 GB once parsed)."""
    monkeypatch.setattr(last_listing, "MAX_FILES", 20)
    monkeypatch.setattr(last_listing, "MAX_FOLDERS", 20)
    monkeypatch.setattr(last_listing, "MAX_QUOTES", 4 * 40)
    assert last_listing._parse(kept(tiny_entries(20, 2))).listing.files == 20
    parsed: list[object] = []
    monkeypatch.setattr(last_listing.json, "loads", lambda *a: parsed.append(a) or {})
    with pytest.raises(ValueError, match="more entries"):
        last_listing._parse(kept(tiny_entries(files, folders)))
    assert parsed == []  # (refused unparsed)


def test_a_folder_of_more_folders_than_kept_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(last_listing, "MAX_FOLDERS", 5)
    for i in range(6):
        (tmp_path / f"d{i}").mkdir()
    assert walk(tmp_path) is None
    monkeypatch.setattr(last_listing, "MAX_FOLDERS", 7)
    assert walk(tmp_path) is not None
