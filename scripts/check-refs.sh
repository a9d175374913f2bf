#!/usr/bin/env bash
# check-refs.sh [SRC_ROOT]: fails when a doc or a comment cites something a clone of the
# repository does not hold. Run in every build (target check-refs), like check-layers.sh.
# In every file git tracks it rejects:
#   - the protocol pages by their old, outside names (procedures.md, wire-formats.md,
#     linux-interop.md, wireshark.md not under docs/protocol/) and ENGINE.md: run
#     scripts/fix-refs.py, which rewrites them to docs/protocol/ and docs/design/;
#   - paths into shared/spec or shared/notes, the reference material that stayed outside
#     (docs/history/ excepted: a diary says where things were); other /work/ paths and
#     shared/vectors (data a test may read where it exists) are only warned about;
#   - a docs/... .md path, a docs-relative parts/ protocol/ design/ history/ path, or a
#     Markdown link target that names no file of the tree;
#   - "docs/protocol/X.md N.M" where X.md has no section N.M.
# Files under docs/protocol/ may cite each other by bare name; scripts/fix-refs.py, this
# script and its test (tests/refs/test_refs.sh) name the old names on purpose.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
exec python3 - "$root" <<'PY'
import os, re, subprocess, sys

root = os.path.abspath(sys.argv[1])
SPEC = ("procedures", "wire-formats", "linux-interop", "wireshark")
OLD = re.compile(r"(?<![\w/.-])((?:" + "|".join(SPEC) + r")\.md|ENGINE\.md)\b")
OUTSIDE = re.compile(r"(?<![\w.-])(?:\.\./)*(?:/work/)?shared/(?:spec|notes)\b")
# Other paths of the machine the project was built on (data a test may read when present):
# reported, not fatal.
ELSEWHERE = re.compile(r"/work/|(?<![\w.-])(?:\.\./)*shared/vectors\b")
DOCPATH = re.compile(r"(?<![\w/.-])(docs/[\w./-]*[\w-]\.md)\b")
DOCREL = re.compile(r"(?<![\w/.-])((?:parts|protocol|design|history)/[\w.-]+\.md)\b")
LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)")
SECTION = re.compile(r"(?<![\w/.-])docs/protocol/([\w-]+\.md) §?(\d+(?:\.\d+)?)(?![\d.]*\d)")
SKIP = ("scripts/fix-refs.py", "scripts/check-refs.sh", "tests/refs/test_refs.sh")
TEXT_EXT = (".c", ".h", ".md", ".txt", ".cmake", ".sh", ".py", ".map", ".def", ".in",
            ".json", ".yml", ".yaml")

files = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                        "--exclude-standard"], check=True, capture_output=True).stdout
files = [f for f in files.decode().split("\0") if f]
tree = set(files)

sections = {}
def has_section(page, num):
    if page not in sections:
        heads = set()
        path = os.path.join(root, "docs/protocol", page)
        if os.path.isfile(path):
            for line in open(path, encoding="utf-8"):
                m = re.match(r"#{2,4} (\d+(?:\.\d+)*)\.? ", line)
                if m:
                    heads.add(m.group(1))
        sections[page] = heads
    return num in sections[page]

def exists(rel):
    rel = os.path.normpath(rel)
    return rel in tree or os.path.isfile(os.path.join(root, rel))

bad, elsewhere = [], []
for rel in files:
    base = os.path.basename(rel)
    if rel in SKIP or not (rel.endswith(TEXT_EXT) or base == "CMakeLists.txt"):
        continue
    full = os.path.join(root, rel)
    if not os.path.isfile(full):
        continue
    try:
        text = open(full, encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    in_protocol = rel.startswith("docs/protocol/")
    in_history = rel.startswith("docs/history/")
    for n, line in enumerate(text.splitlines(), 1):
        where = "%s:%d" % (rel, n)
        if not in_protocol:
            for m in OLD.finditer(line):
                bad.append("%s: cites %s, which is not in the repository (run scripts/fix-refs.py)"
                           % (where, m.group(1)))
        if not in_history and OUTSIDE.search(line):
            bad.append("%s: points outside the repository: %s" % (where, line.strip()))
        elif not in_history and ELSEWHERE.search(line):
            elsewhere.append("%s: a path outside the repository: %s" % (where, line.strip()))
        for m in DOCPATH.finditer(line):
            if not exists(m.group(1)):
                bad.append("%s: cites %s, which does not exist" % (where, m.group(1)))
        if rel.startswith("docs/"):
            for m in DOCREL.finditer(line):
                p = m.group(1)
                if not exists(os.path.join("docs", p)) and \
                   not exists(os.path.join(os.path.dirname(rel), p)):
                    bad.append("%s: cites %s, which does not exist" % (where, p))
        if rel.endswith(".md"):
            for m in LINK.finditer(line):
                t = m.group(1)
                if "://" in t:
                    continue
                if not exists(os.path.join(os.path.dirname(rel), t)):
                    bad.append("%s: links to %s, which does not exist" % (where, t))
        for m in SECTION.finditer(line):
            if not has_section(m.group(1), m.group(2)):
                bad.append("%s: cites docs/protocol/%s %s, a section it does not have"
                           % (where, m.group(1), m.group(2)))

# A quoted section of a page ('docs/parts/x.md "Heading"') should name a heading or a bold
# phrase of that page. Only a warning: a quote may also be a phrase of the text.
QUOTE = re.compile(r'(?<![\w/.-])((?:\.\./)?(?:docs/)?(?:parts|history|protocol|design)/[\w.-]+\.md),? \\?"([^"\n]{2,60})"')
marks = {}
def page_marks(path):
    if path not in marks:
        m = []
        if os.path.isfile(os.path.join(root, path)):
            for line in open(os.path.join(root, path), encoding="utf-8"):
                h = re.match(r"#+ (?:[\d.]+\.? )?(.*)", line)
                if h:
                    m.append(h.group(1).strip().lower())
                m += [b.lower() for b in re.findall(r"\*\*([^*]+)\*\*", line)]
        marks[path] = m
    return marks[path]
warn = []
for rel in files:
    if rel in SKIP or not (rel.endswith(TEXT_EXT) or os.path.basename(rel) == "CMakeLists.txt"):
        continue
    full = os.path.join(root, rel)
    if not os.path.isfile(full):
        continue
    try:
        lines = open(full, encoding="utf-8").read().splitlines()
    except UnicodeDecodeError:
        continue
    for n, line in enumerate(lines, 1):
        for m in QUOTE.finditer(line):
            p, q = m.group(1), m.group(2).lower()
            if p.startswith("../"):
                p = os.path.normpath(os.path.join(os.path.dirname(rel), p))
            elif not p.startswith("docs/"):
                p = "docs/" + p
            if not any(q in k for k in page_marks(p)):
                warn.append('%s:%d: %s has no heading or bold phrase "%s"'
                            % (rel, n, m.group(1), m.group(2)))
for w in warn + elsewhere:
    print("check-refs: warning: " + w, file=sys.stderr)
for b in bad:
    print("check-refs: " + b, file=sys.stderr)
if bad:
    print("check-refs: %d reference(s) a clone cannot follow" % len(bad), file=sys.stderr)
    sys.exit(1)
PY
