"""Count the words on each chapter's main path.

The main path is the prose a reader meets without opening anything: the chapter's
markdown once the Jupytext front matter, code cells, fenced code and
``literalinclude`` blocks, display math (``$$ ... $$`` and ``{math}``) and every
collapsed block (``{dropdown}``, ``{toggle}``, ``{solution}``, and any directive with
``:class: dropdown`` or ``:class: toggle``, in backtick or colon fences, at any depth)
are taken out. What is left is counted as words after the markdown syntax is stripped:
a role such as ``{ref}`sec-x``` counts as one word, as do inline code and inline math.

The total column counts the prose of the whole chapter, collapsed blocks included
(code and display math excluded in both columns), so ``total - main path`` is the prose
a reader must open something to see.

Usage::

    python scripts/main_path_words.py                      # every notebooks/*.md
    python scripts/main_path_words.py notebooks/07_rope.md
    python scripts/main_path_words.py --check              # exit 1 past the limits

``--check`` fails when a chapter's main path passes ``--max`` words (3,500) or the
median over the chapters given passes ``--median`` words (3,000). Companion pages
(``NN_name_evidence.md``) are listed but not held to the limits. In a tab set only the
first tab counts toward the main path (the page opens on it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAX_WORDS = 3500
MEDIAN_WORDS = 3000

# Directives whose body is code, data or machinery, never prose on the page.
CODE_DIRECTIVES = {
    "code-cell", "code", "code-block", "sourcecode", "literalinclude", "math",
    "raw", "eval-rst", "eval-rest", "bibliography", "footbibliography",
    "tableofcontents", "glue", "glue:", "glue:any", "glue:math", "glue:md", "glue:text",
}
# Directives whose body is collapsed by default.
COLLAPSED_DIRECTIVES = {"dropdown", "toggle", "solution", "solution-start"}
# Directives whose argument is a path or a key, not a visible title.
ARGUMENT_NOT_PROSE = {"figure", "image", "glue:figure", "include", "only"}
COLLAPSED_CLASSES = {"dropdown", "toggle"}

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|:{3,})\s*(.*)$")
OPTION_LINE = re.compile(r"^:([\w-]+):\s*(.*)$")
DIRECTIVE_INFO = re.compile(r"^\{([^}]+)\}\s*(.*)$")


@dataclass
class Counts:
    main: int
    total: int


def strip_front_matter(text: str) -> str:
    """Drop a leading YAML block delimited by ``---`` lines."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return "\n".join(lines[i + 1:])
    return text


def _split_options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """Split a directive body into its options (``:key: value`` or a YAML block)."""
    options: dict[str, str] = {}
    i = 0
    if body and body[0].strip() == "---":
        for j in range(1, len(body)):
            if body[j].strip() == "---":
                for line in body[1:j]:
                    key, _, value = line.partition(":")
                    options[key.strip()] = value.strip()
                i = j + 1
                break
    else:
        while i < len(body):
            m = OPTION_LINE.match(body[i].strip())
            if not m:
                break
            options[m.group(1)] = m.group(2)
            i += 1
    return options, body[i:]


def _find_close(lines: list[str], start: int, char: str, length: int) -> int:
    """Index of the line that closes a fence of ``length`` ``char`` (or len(lines))."""
    closer = re.compile(r"^\s*" + re.escape(char) + "{" + str(length) + r",}\s*$")
    for j in range(start, len(lines)):
        if closer.match(lines[j]):
            return j
    return len(lines)


def split_prose(lines: list[str], in_tab_set: bool = False) -> tuple[list[str], list[str]]:
    """Return (main-path prose lines, collapsed prose lines) of a markdown fragment.

    In a tab set (``in_tab_set``) only the first tab is on the main path: the page opens on
    it, and the other tabs (the same listing in the other framework) are one click away.
    """
    main: list[str] = []
    hidden: list[str] = []
    tabs_seen = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        # Display math: $$ ... $$ on one line or across lines (with an optional label).
        if stripped.startswith("$$"):
            if stripped.count("$$") >= 2 and len(stripped) > 2:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and "$$" not in lines[j]:
                j += 1
            i = j + 1
            continue
        m = FENCE_OPEN.match(line)
        if not m:
            main.append(line)
            i += 1
            continue
        fence, info = m.group(2), m.group(3).strip()
        char = fence[0]
        if char == "`" and "`" in info:  # not a fence: an inline code span
            main.append(line)
            i += 1
            continue
        close = _find_close(lines, i + 1, char, len(fence))
        body = lines[i + 1:close]
        i = close + 1
        d = DIRECTIVE_INFO.match(info)
        if not d:
            if char == ":" and info == "":
                # A stray colon line: not a block we know; keep its text.
                main.extend(body)
            continue  # a plain fenced code block
        name, argument = d.group(1).strip().lower(), d.group(2).strip()
        if name in CODE_DIRECTIVES:
            continue
        options, content = _split_options(body)
        classes = set(options.get("class", "").replace(",", " ").split())
        inner_main, inner_hidden = split_prose(content, in_tab_set=name == "tab-set")
        title = [argument] if argument and name not in ARGUMENT_NOT_PROSE else []
        later_tab = in_tab_set and name == "tab-item" and tabs_seen > 0
        tabs_seen += name == "tab-item"
        if later_tab or name in COLLAPSED_DIRECTIVES or classes & COLLAPSED_CLASSES:
            if name == "solution":  # the argument is the exercise's label
                title = []
            hidden.extend(title + inner_main + inner_hidden)
        else:
            main.extend(title + inner_main)
            hidden.extend(inner_hidden)
    return main, hidden


_ROLE = re.compile(r"\{[\w:.-]+\}`[^`]*`")
_CODE = re.compile(r"`+[^`]+`+")
_MATH = re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]*)\]\[[^\]]*\]")
_HTML = re.compile(r"<[^>\n]+>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LABEL = re.compile(r"^\s*\([\w:.-]+\)=\s*$", re.M)
_MYST_COMMENT = re.compile(r"^\s*%.*$", re.M)
_CELL_MARKER = re.compile(r"^\+\+\+.*$", re.M)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.M)
_WORD = re.compile(r"[^\W_]", re.UNICODE)


def count_words(markdown: str) -> int:
    """Count the words of a markdown fragment; a role, code span or inline math is one."""
    text = _COMMENT.sub(" ", markdown)
    text = _LABEL.sub(" ", text)
    text = _MYST_COMMENT.sub(" ", text)
    text = _CELL_MARKER.sub(" ", text)
    text = _TABLE_RULE.sub(" ", text)
    text = _ROLE.sub(" ROLE ", text)
    text = _CODE.sub(" CODE ", text)
    text = _MATH.sub(" MATH ", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r" \1 ", text)
    text = _REF_LINK.sub(r" \1 ", text)
    text = _HTML.sub(" ", text)
    return sum(1 for token in text.split() if _WORD.search(token))


def count_text(text: str) -> Counts:
    """Main-path and total prose words of a chapter's MyST markdown."""
    lines = strip_front_matter(text).splitlines()
    main, hidden = split_prose(lines)
    main_words = count_words("\n".join(main))
    return Counts(main=main_words, total=main_words + count_words("\n".join(hidden)))


def is_evidence(path: Path) -> bool:
    """A companion page (``NN_name_evidence.md``): listed, but not held to the limits, since
    everything on it is one click away from its chapter's main path."""
    return path.stem.endswith("_evidence")


def _display(path: Path) -> str:
    """The path relative to the working directory when it lies under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path,
                        help="chapter .md files (default: every notebooks/*.md)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a chapter or the median passes the limits")
    parser.add_argument("--max", type=int, default=MAX_WORDS,
                        help=f"most main-path words in one chapter (default {MAX_WORDS})")
    parser.add_argument("--median", type=int, default=MEDIAN_WORDS,
                        help=f"largest median of main-path words (default {MEDIAN_WORDS})")
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "notebooks").glob("*.md"))
    if not files:
        parser.error("no chapter files: pass .md files or run from the repository")
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        parser.error(f"files={[str(f) for f in missing]} do not exist; pass paths to "
                     "chapter .md files such as notebooks/07_rope.md")
    rows = []
    for f in files:
        counts = count_text(Path(f).read_text(encoding="utf-8"))
        rows.append((_display(Path(f)), counts.main, counts.total, is_evidence(Path(f))))
    width = max(len("file"), *(len(r[0]) for r in rows))
    print(f"{'file':<{width}}  {'main path':>9}  {'total':>6}")
    for name, main_words, total, evidence in rows:
        flag = ("  (evidence page)" if evidence
                else "  > max" if main_words > args.max else "")
        print(f"{name:<{width}}  {main_words:>9,}  {total:>6,}{flag}")
    chapters = [r for r in rows if not r[3]]
    median = statistics.median(r[1] for r in chapters) if chapters else 0
    print(f"{'median of the chapters':<{width}}  {median:>9,.0f}")
    if args.check:
        over = [r[0] for r in chapters if r[1] > args.max]
        failed = False
        if over:
            print(f"main path over {args.max:,} words: {', '.join(over)}; move evidence "
                  "into collapsed blocks or a companion page", file=sys.stderr)
            failed = True
        if median > args.median:
            print(f"median main path {median:,.0f} words is over {args.median:,}",
                  file=sys.stderr)
            failed = True
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
