"""No command line prints an English sentence of its own: every line the CLIs echo is a row of
the word table (``say``), so a new English-only line fails here before a Chinese
administrator's terminal shows it; and every refusal the command lines (and the checks they
print the words of) make in English is said again by a row in Chinese."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGLISH = re.compile(r"[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}")
CJK = re.compile(r"[\u4e00-\u9fff]")
PRINTS = {("typer", "echo"), ("typer", "secho"), ("err", "print"), ("console", "print")}
# What the indexer's and the service's logs say (``watch``'s, ``index``'s, the service's
# lines an operator reads).
LOGS = {("log", "warning"), ("log", "error"), ("log", "info")}
# What a refusal is raised as, where its English is made for a command line to print.
REFUSALS = {"BadParameter", "ValueError", "PolicyError"}
CLI = ("retrieval_svc/cli", "indexer/cli")
# The checks whose refusals a command line prints (as an option's or a setting's problem).
CHECKS = (
    "retrieval_svc/key_entry.py",
    "retrieval_svc/tenancy.py",
    "retrieval_svc/config_checks.py",
    "indexer/shards.py",
    "indexer/chunking.py",
)


def _text(node: ast.expr, value: str = "{}") -> str | None:
    """A literal or f-string's words (its values as ``value``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else value for v in node.values)
    return None


def _parse(path: Path) -> ast.Module:
    """``path``'s tree. CPython 3.11.7 keeps the AST builder's depth count in one place for
    every thread (gh-106905, fixed in 3.11.8): a traceback formatted meanwhile on another thread
    (3.11's traceback parses the failing line) leaves it off and the build fails with "AST
    constructor recursion depth mismatch" though the file is sound. Such a build is tried again."""
    for _ in range(9):
        try:
            return ast.parse(path.read_text("utf-8"))
        except SystemError as error:
            if "recursion depth mismatch" not in str(error):
                raise
    return ast.parse(path.read_text("utf-8"))


def _calls(paths: list[Path]) -> list[tuple[Path, ast.Call]]:
    return [
        (path, node)
        for path in paths
        for node in ast.walk(_parse(path))
        if isinstance(node, ast.Call) and node.args
    ]


def _sources(*places: str) -> list[Path]:
    found: list[Path] = []
    for place in places:
        path = ROOT / place
        found.extend(sorted(path.glob("*.py")) if path.is_dir() else [path])
    return found


def english_lines() -> list[str]:
    found = []
    logged = [*(ROOT / "indexer").rglob("*.py"), *(ROOT / "retrieval_svc").rglob("*.py")]
    for path, node in _calls(sorted({*_sources(*CLI), *logged})):
        func = node.func
        owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
        if (owner, getattr(func, "attr", "")) not in PRINTS | LOGS:
            continue
        text = _text(node.args[0])
        if text and ENGLISH.search(re.sub(r"\{\}|%[sdr]|`[^`]*`", "", text)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    return found


def refusals_no_row_says() -> list[str]:
    """Each English refusal (its values as 1: a count or a name alike) that no problem row
    says again in Chinese."""
    from retrieval_svc.words import problem

    found = []
    for path, node in _calls(_sources(*CLI, *CHECKS)):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in REFUSALS:
            continue
        text = "".join(_text(arg, "1") or "" for arg in node.args[:1])
        if isinstance(node.args[0], ast.BinOp):  # ("…" "…" split over lines is one Constant)
            continue
        if text and ENGLISH.search(re.sub(r"`[^`]*`", "", text)):
            said = problem(text, "zh")
            if not CJK.search(said) or ENGLISH.search(re.sub(r"`[^`]*`|（[^）]*）", "", said)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:70]}")
    return found


def test_no_command_line_echoes_an_english_sentence_of_its_own() -> None:
    """Nor does the indexer's log (``index``, ``watch``) or the service's: each is a row."""
    assert english_lines() == []


def progress_words() -> list[str]:
    """A progress bar's description or unit written as a literal (it shows in a terminal only,
    where no captured-output test looks)."""
    found = []
    for path in sorted((ROOT / "indexer/cli").glob("*.py")):
        for node in ast.walk(_parse(path)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_task"):
                continue
            said = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "unit")]
            for arg in said:
                text = _text(arg)
                if text and re.search(r"[A-Za-z]{3,}", text.replace("{}", "")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    return found


def test_the_progress_bars_speak_through_the_word_table() -> None:
    assert progress_words() == []


def test_the_scripts_a_guide_runs_have_no_english_only_line() -> None:
    """``scripts/es.sh`` and ``scripts/libreoffice.sh`` (the guides' first step) say every
    line through ``log2``/``die2``/``say2``: English under an English locale, Chinese under a
    Chinese one."""
    one_language = re.compile(r"(^|[;{&|]\s*)(log|die|echo) \"[^\"]*[A-Za-z]{3,} [A-Za-z]{2,}")
    found = [
        f"{name}:{n}: {line.strip()[:70]}"
        for name in ("es.sh", "libreoffice.sh")
        for n, line in enumerate((ROOT / "scripts" / name).read_text("utf-8").splitlines(), 1)
        if one_language.search(line.strip())
    ]
    assert found == []


def test_every_refusal_a_command_line_prints_is_said_again_in_chinese() -> None:
    """``--every xx``, ``--tenant ' x'``, ``--shard 5/2``, a key entry that cannot work: the
    English made where the value is refused has a row (``words.PROBLEMS``) that says it in
    Chinese where Typer or the command prints it."""
    assert refusals_no_row_says() == []


# A line a script prints: echo, printf or its log helper, with a double-quoted literal.
SCRIPT_SAYS = re.compile(
    r"""(?:^|[;&|{(]\s*|\s)(?:echo|log|printf)\s+(?:'[^']*'\s+)?"((?:[^"\\]|\\.|\$\([^)]*\))*)\""""
)


def script_english_lines() -> list[str]:
    """Lines of scripts/ that print an English sentence not through ``say2`` (scripts/_say.sh)
    or es.sh's ``say``/``log2`` — values (``$x``, ``$(…)``) aside."""
    scripts = ROOT / "scripts"
    found = []
    paths = [scripts / "test", scripts / "check-deploy", scripts / "demo", *scripts.glob("*.sh")]
    for path in sorted(p for p in paths if p.name != "_say.sh"):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if line.lstrip().startswith("#") or re.search(r"\b(say2|log2|say) ", line):
                continue
            for said in SCRIPT_SAYS.finditer(line):
                words = re.sub(r"\$\([^)]*\)|\$\{[^}]*\}|\$\w+", "", said.group(1))
                if ENGLISH.search(words):
                    found.append(f"scripts/{path.name}:{number}: {line.strip()[:80]}")
    return found


def test_no_script_prints_an_english_sentence_of_its_own() -> None:
    """scripts/test's ``test:`` lines, check-deploy's, the servers' and installers' lines: each
    in both languages through ``say2``, so a Chinese terminal reads Chinese."""
    assert script_english_lines() == []


# A line a script's inline Python prints: ``print("…"`` or ``print(f"…"``.
PYTHON_SAYS = re.compile(r"""\bprint\(\s*f?(["'])(.*?)\1""")


def script_python_english_lines() -> list[str]:
    """Lines of the scripts' inline Python (``python - <<'PY'``) that print an English sentence
    with no Chinese beside it on the line (check-deploy says both: ``"…" if zh else "…"``)."""
    found = []
    for path in sorted((ROOT / "scripts").iterdir()):
        if not path.is_file() or path.suffix == ".py" or path.name.startswith("_"):
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            for said in PYTHON_SAYS.finditer(line):
                words = re.sub(r"\{[^}]*\}", "", said.group(2))
                if ENGLISH.search(words) and not CJK.search(line):
                    found.append(f"scripts/{path.name}:{number}: {line.strip()[:80]}")
    return found


def test_no_script_s_inline_python_prints_an_english_sentence_of_its_own() -> None:
    """scripts/test's smokes ("relevance smoke ok", "benchmark smoke ok"): the Python checks,
    the script says the line through ``say2``."""
    assert script_python_english_lines() == []


def bench_english_lines(*places: str) -> list[str]:
    """What a benchmark prints to the terminal (``print(…, file=sys.stderr)``) or ends with
    (``SystemExit("…")``, ``parser.error("…")``) as an English literal of its own instead of a
    row (``say``)."""
    found = []
    for path, node in _calls(_sources(*places)):
        func = node.func
        printed = getattr(func, "id", "") == "print" and any(k.arg == "file" for k in node.keywords)
        refused = getattr(func, "id", "") == "SystemExit" or getattr(func, "attr", "") == "error"
        if not (printed or refused):
            continue
        text = _text(node.args[0])
        if text and re.search(r"[A-Za-z]{3,}", text.replace("{}", "")):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    return found


BENCHES = sorted({str(p.parent.relative_to(ROOT)) for p in (ROOT / "bench").rglob("*.py")})


def test_the_benches_say_their_progress_through_the_word_table() -> None:
    """``python -m bench.query``, ``bench.hybrid``, ``bench.relevance`` (scripts/test's smokes
    show their lines), and every other benchmark: each line a row, in both languages."""
    assert {"bench/query", "bench/hybrid", "bench/relevance"} <= set(BENCHES)
    assert bench_english_lines(*BENCHES) == []


def test_each_row_a_bench_says_is_there_with_the_values_it_takes() -> None:
    """A benchmark's line is said only when it runs (minutes, against Elasticsearch): a row
    named wrong, or given other values than it takes, is found here instead."""
    from retrieval_svc.words import LINES, fields

    wrong = []
    for path, node in _calls(_sources(*BENCHES)):
        if getattr(node.func, "id", "") != "say" or not isinstance(node.args[0], ast.Constant):
            continue
        key, given = node.args[0].value, {k.arg for k in node.keywords}
        if key not in LINES or given != fields(LINES[key][0]):
            wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {key} {sorted(given)}")  # type: ignore[arg-type]
    assert wrong == []


def _commands() -> list[tuple[object, tuple[str, ...], object]]:
    """Every command of both command lines: (its app, its path of names, the Click command)."""
    from typer.main import get_command

    from indexer.cli import app as indexer
    from retrieval_svc.cli import app as service

    found: list[tuple[object, tuple[str, ...], object]] = []

    def walk(app: object, path: tuple[str, ...], command: object) -> None:
        found.append((app, path, command))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(app, (*path, name), sub)

    for app in (service, indexer):
        walk(app, (), get_command(app))  # type: ignore[arg-type]
    return found


def test_every_command_and_option_help_has_a_chinese_row() -> None:
    from retrieval_svc.help_words import HELP, chinese

    helps = {"Show this message and exit."}  # (Click's --help, on every command)
    for _, _, command in _commands():
        helps.add(command.help)  # type: ignore[attr-defined]
        helps.update(p.help for p in command.params if getattr(p, "help", None))  # type: ignore[attr-defined]
    without = sorted(h for h in helps if not CJK.search(chinese(h) or ""))
    assert not without, f"help with no Chinese row in retrieval_svc/help_rows*.py: {without}"
    assert all(CJK.search(z) for z in HELP.values())


# What --help may show in Latin letters: option names, metavars, RSVC_* names, code, paths.
ALLOWED = re.compile(r"--?[\w-]+|<[^>]*>|`[^`]*`|\[[A-Z_ ./]+\]|\S+://\S*|[A-Z][A-Z_]+\b")


def test_help_under_a_chinese_locale_prints_no_english_sentence() -> None:
    from typer.testing import CliRunner

    runner = CliRunner()
    zh = {"RSVC_LANG": None, "LC_ALL": None, "LC_MESSAGES": None, "LANG": "zh_CN.UTF-8"}
    english = []
    for app, path, command in _commands():
        result = runner.invoke(app, [*path, "--help"], env=zh)  # type: ignore[arg-type]
        assert result.exit_code == 0, result.output
        assert "用法：" in result.output and "显示本帮助并退出。" in result.output
        for line in result.output.splitlines():
            if line.strip().startswith("用法："):
                continue  # (the command's own path and metavars)
            if found := ENGLISH.search(ALLOWED.sub(" ", line)):
                english.append(f"{' '.join(path)}: {found.group(0)!r} in {line.strip()!r}")
        result = runner.invoke(app, [*path, "--help"], env={**zh, "LANG": "C.UTF-8"})  # type: ignore[arg-type]
        assert "Usage:" in result.output and "─ Options ─" in result.output
        first = (command.help or "").split("\n")[0][:20]  # type: ignore[attr-defined]
        assert first in " ".join(result.output.split()), result.output
    assert not english, "\n".join(english)
