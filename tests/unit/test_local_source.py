"""The folder is hostile too (issue #37 §3), and nothing is passed over in silence (issue #34
§1): a link loop, a link out of the folder, a FIFO, a name that is not UTF-8 and files of
types the indexer does not read are each counted with their reason; the listing streams.
Links are never followed (issue #56 §1): to a file or a folder, inside or out, in a chain or a
loop, for documents and sidecars alike; a folder that cannot be read is a listing failure."""

from __future__ import annotations

import os
from pathlib import Path

from indexer.sources import LocalSource


def test_a_hostile_folder_lists_its_documents_and_names_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / "good.md").write_text("# 好\n\n正文", encoding="utf-8")
    (root / "sub" / "also.txt").write_text("正文", encoding="utf-8")
    (root / ".hidden.md").write_text("x", encoding="utf-8")  # on purpose: not counted
    (root / "good.md.meta.json").write_text("{}", encoding="utf-8")  # a sidecar: not counted
    outside = tmp_path / "secret.md"
    outside.write_text("机密", encoding="utf-8")
    (root / "leak.md").symlink_to(outside)
    (root / "inside.md").symlink_to(root / "good.md")  # a link inside: not followed either
    (root / "loop").symlink_to(root, target_is_directory=True)
    os.mkfifo(root / "pipe.md")
    (root / "drawing.vsdx").write_bytes(b"x")
    (root / "a.zip").write_bytes(b"x")
    (root / "b.zip").write_bytes(b"x")
    (root / "README").write_bytes(b"x")
    bad = os.fsencode(root) + b"/bad-\xff.md"
    with open(bad, "wb") as f:
        f.write(b"x")
    source = LocalSource(root)
    keys = [ref.key for ref in source.list()]  # (a FIFO opened would hang: it never is)
    assert keys == ["good.md", "sub/also.txt"]
    counts = source.passed_over.counts
    assert counts == {
        "a symbolic link: not followed": 3,
        "not a regular file (a FIFO, device or socket)": 1,
        "the name is not valid UTF-8": 1,
        "unsupported .vsdx": 1,
        "unsupported .zip": 2,
        "unsupported (no suffix)": 1,
    }, counts
    assert source.passed_over.examples["unsupported .zip"] == ["a.zip", "b.zip"]
    assert source.passed_over.examples["a symbolic link: not followed"] == [
        "inside.md", "leak.md", "loop",
    ]  # fmt: skip
    assert source.failures == []
