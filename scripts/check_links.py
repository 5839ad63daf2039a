#!/usr/bin/env python3
"""Check every relative link and anchor in the project's Markdown.

`make docs-check` (run by `make test`). Reads README.md, docs/**/*.md, the
package READMEs and the files docs/ includes with mdBook's `{{#include}}`,
and fails (exit 1, one line per problem) when a relative link points to a
file that does not exist or to an anchor that no heading of its file makes.
Anchors are GitHub's heading slugs (mdBook makes the same ones): lower case,
punctuation dropped, spaces as hyphens, a repeated heading gets -1, -2, ...
Links with a scheme (https:, mailto:) are not fetched. Standard library only.

Usage: scripts/check_links.py [FILE.md ...]   (default: the set above)
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [
    "README.md",
    "docs/**/*.md",
    "client/README.md",
    "bindings/python/README.md",
    "bindings/node/README.md",
]

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INCLUDE = re.compile(r"\{\{#include\s+([^\s}:]+)(?::[^}]*)?\}\}")
# [text](target "title") and ![alt](target): the target up to a space or ')'.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ATTR = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
HTML_ID = re.compile(r"""<[a-z]+\b[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, seen=None):
    """Every anchor a Markdown file (with what it includes) defines."""
    seen = seen or set()
    if path in seen or not path.is_file():
        return set()
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    found, counts = set(), {}
    for _, line in prose_lines(text):
        for inc in INCLUDE.findall(line):
            found |= anchors((path.parent / inc).resolve(), seen)
        found.update(HTML_ID.findall(line))
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(text):
    """(line number, target) of every link, image and include in the prose."""
    for number, line in prose_lines(text):
        for inc in INCLUDE.findall(line):
            yield number, inc
        bare = CODE_SPAN.sub("", line)
        for pattern in (INLINE, HTML_ATTR):
            for target in pattern.findall(bare):
                yield number, target
        m = REFDEF.match(bare)
        if m:
            yield number, m.group(1)


def check(path, cache):
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, target in links(text):
        if SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor:
            if dest.suffix != ".md":
                problems.append(f"{where}: anchor in a file that is not Markdown")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor not in cache[dest]:
                problems.append(f"{where}: no heading makes #{anchor}")
    return problems


def main(args):
    patterns = args or DEFAULT
    files = []
    for pattern in patterns:
        matched = sorted(ROOT.glob(pattern)) if not Path(pattern).is_absolute() else [Path(pattern)]
        files += [f.resolve() for f in matched if f.is_file()]
    # What docs/ includes is part of the book: check its links too.
    for f in list(files):
        for _, line in prose_lines(f.read_text(encoding="utf-8")):
            for inc in INCLUDE.findall(line):
                target = (f.parent / inc).resolve()
                if target.suffix == ".md" and target.is_file() and target not in files:
                    files.append(target)
    cache, problems = {}, []
    for f in files:
        problems += check(f, cache)
    for p in problems:
        print(p)
    print(f"docs-check: {len(files)} files, {len(problems)} broken link(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
