#!/usr/bin/env python3
"""fix-refs.py [--check] [--wrap-cited] [ROOT]: make the docs and comments cite what a clone holds.

Rewrites, in every file git tracks under ROOT (default: the repository holding this script),
the citations of the protocol reference that used to live outside the repository and of the
engine's lost design note, into the repository's own pages, which keep the same section
numbers:

  procedures.md, wire-formats.md, linux-interop.md, wireshark.md  (bare, "spec X.md",
  ../shared/spec/X.md, /work/shared/spec/X.md)       -> docs/protocol/X.md
  ENGINE.md                                           -> docs/design/engine-decisions.md
  shared/notes/X.md (any prefix)                      -> docs/protocol/X.md, if that exists
  parts/P.md "Round N" / Rounds / section N / dated   -> history/P.md ... (the diary of P,
      for P a page whose dated rounds moved to docs/history/; the same path prefix kept)
  in docs/history/: a link ](X.md) to a page of docs/parts/ -> ](../parts/X.md)

Inside a Markdown link target, "](X.md" becomes the path relative to the file. Files under
docs/protocol/ cite each other by bare name on purpose and are left alone, as are this script,
scripts/check-refs.sh and their test, tests/refs/test_refs.sh.

In C sources, headers and CMakeLists.txt a comment line the rewrite made wider than 100
columns is wrapped at a space, with the same indentation and comment leader.

Idempotent: a citation already rewritten is preceded by "/" and never matches again, so the
script can be re-run on any later tree (after merging other branches). It prints the files it
changed, then every reference to something outside the repository that it could not map
(/work/..., shared/..., ../shared/...), one "path:line: text" per line. --check changes
nothing and exits 1 when a run would change a file. --wrap-cited also wraps the comment lines
wider than 100 columns that cite docs/protocol/, docs/design/ or docs/history/ (the lines an
earlier run lengthened).
"""
import os
import re
import subprocess
import sys

SPEC = ("procedures", "wire-formats", "linux-interop", "wireshark")
SKIP_DIRS = ("docs/protocol/",)
SKIP_FILES = ("scripts/fix-refs.py", "scripts/check-refs.sh", "tests/refs/test_refs.sh")
TEXT_EXT = (".c", ".h", ".md", ".txt", ".cmake", ".sh", ".py", ".map", ".bpf.c", ".def",
            ".in", ".json", ".yml", ".yaml", ".1", ".5", ".7")

# A citation of one of the four pages, optionally with the old location or a "spec " in
# front. Not preceded by a word character, "/", "." or "-": a path already under docs/ (or
# any other directory) is left as it is, which is what makes a second run change nothing.
SPEC_RE = re.compile(
    r"(?<![\w/.-])(?P<pre>spec |(?:\.\./)*(?:/work/)?shared/spec/)?"
    r"(?P<name>" + "|".join(re.escape(s) for s in SPEC) + r")\.md\b")
ENGINE_RE = re.compile(r"(?<![\w/.-])ENGINE\.md\b")
# A note of the shared notes folder whose facts were written into docs/protocol/ under the
# same name (mapped only when that page exists in the tree).
NOTES_RE = re.compile(r"(?<![\w/.-])(?:\.\./)*(?:/work/)?shared/notes/(?P<name>[\w.-]+)\.md\b")
# What is left that points outside the repository.
OUTSIDE_RE = re.compile(r"/work/|(?<![\w.-])(?:\.\./)*shared/(?:spec|notes|vectors)\b")


# A diary citation of a page whose rounds moved to docs/history/: "parts/conns.md Round 5",
# "parts/connect.md "Round 4"", "parts/hold.md section 5", "conns.md, 16:27-17:26".
HISTORY = ("connect", "conns", "stream", "hold", "tune")
DIARY_RE = re.compile(
    r"(?<![\w./-])(?P<pre>(?:\.\./|docs/)?parts/)?(?P<name>" + "|".join(HISTORY) + r")\.md"
    r"(?P<post>,? \(?\"?(?:Round|Rounds|round|section [0-9]|[0-9]{1,2}:[0-9]{2}))")
LINK_RE = re.compile(r"\]\((?P<t>[\w.-]+\.md)(?P<rest>[#)])")


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                         capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def target(path, dest, in_link):
    if in_link:
        return os.path.relpath(dest, os.path.dirname(path) or ".")
    return dest


def rewrite(path, text, root):
    is_md = path.endswith(".md")

    def spec_sub(m):
        dest = "docs/protocol/%s.md" % m.group("name")
        in_link = is_md and text[max(0, m.start() - 2):m.start()] == "]("
        return target(path, dest, in_link)

    def engine_sub(m):
        in_link = is_md and text[max(0, m.start() - 2):m.start()] == "]("
        return target(path, "docs/design/engine-decisions.md", in_link)

    def notes_sub(m):
        dest = "docs/protocol/%s.md" % m.group("name")
        if not os.path.isfile(os.path.join(root, dest)):
            return m.group(0)
        in_link = is_md and text[max(0, m.start() - 2):m.start()] == "]("
        return target(path, dest, in_link)

    def diary_sub(m):
        pre = m.group("pre")
        if pre is None:
            # a bare name: only within docs/parts/ (or docs/) is it a page of docs/parts/
            if not (path.startswith("docs/parts/") or path.startswith("docs/history/")):
                return m.group(0)
            if path.startswith("docs/history/"):
                return m.group(0)
            return "../history/%s.md%s" % (m.group("name"), m.group("post"))
        return "%shistory/%s.md%s" % (pre.replace("parts/", ""), m.group("name"),
                                      m.group("post"))

    def hlink_sub(m):
        t = m.group("t")
        if os.path.isfile(os.path.join(root, "docs/history", t)) or \
           not os.path.isfile(os.path.join(root, "docs/parts", t)):
            return m.group(0)
        return "](../parts/%s%s" % (t, m.group("rest"))

    text = SPEC_RE.sub(spec_sub, text)
    text = ENGINE_RE.sub(engine_sub, text)
    text = NOTES_RE.sub(notes_sub, text)
    if not path.startswith("docs/history/"):
        text = DIARY_RE.sub(diary_sub, text)
    else:
        text = LINK_RE.sub(hlink_sub, text)
    return text


CITED_RE = re.compile(r"docs/(?:protocol|design|history)/")
COMMENT_LINE = re.compile(r"^(?P<ind>\s*)(?P<lead>/\*|\*|#|//)(?P<sp> +)")
LIMIT = 100


def width(line):
    return len(line.expandtabs(8))


def wrap_line(line):
    """One line: a comment-only line wider than LIMIT whose end is padding shrinks its
    padding; otherwise it is returned as it is (wrap_lines does the splitting)."""
    m = COMMENT_LINE.match(line)
    if not m or width(line) <= LIMIT:
        return [line]
    # a banner padded to the width ("/* ---- name ---- */", "/* name      */"): the padding
    # shrinks first
    pad = re.search(r"(?P<run>(?:-{3,}|={3,}| {3,}))(?P<end> ?\*/\s*)$", line)
    if pad:
        keep = len(pad.group("run")) - (width(line) - LIMIT)
        if keep >= 1:
            return [line[:pad.start("run")] + pad.group("run")[0] * keep + pad.group("end")]
    return [line]


def prefix_of(line):
    """The continuation prefix of a comment line ("\t * " for "\t/* text", the leader and
    the text's indentation, two more under a "- " bullet), or None for a line that is not
    comment-only."""
    m = COMMENT_LINE.match(line)
    if not m:
        return None
    body = line[m.end():]
    if m.group("lead") in ("/*", "*") and "*/" in body and not body.rstrip().endswith("*/"):
        return None  # code after the comment
    lead = " *" if m.group("lead") == "/*" else m.group("lead")
    sp = m.group("sp")
    if body.startswith("- "):
        sp += "  "
    return m.group("ind") + lead + sp


def split_at(line, start):
    """(head, tail) with head the longest prefix ending before a space, at most LIMIT wide,
    past start and leaving tail more than a lone comment end; None if there is none."""
    best = None
    for i in range(start, len(line)):
        if line[i] == " " and width(line[:i]) <= LIMIT:
            tail = line[i + 1:].strip()
            if tail and tail != "*/":
                best = i
    if best is None:
        return None
    return line[:best].rstrip(), line[best + 1:].lstrip()


def wrap_lines(lines, marked):
    """Wraps the marked lines (indexes) wider than LIMIT; words pushed out of a line move to
    the start of the next line of the same comment paragraph (same prefix, not a new bullet,
    not a blank or closing line), which is then wrapped in turn."""
    out = []
    carry, cprefix = None, None
    for k, line in enumerate(lines):
        if carry is not None:
            p = prefix_of(line)
            m = COMMENT_LINE.match(line)
            body = line[m.end():] if m else ""
            if p == cprefix and m and m.group("lead") != "/*" and body.strip() and \
               not body.startswith("- ") and body.strip() != "*/":
                line = cprefix + carry + " " + body
                marked = marked | {k}
            else:
                out.append(cprefix + carry)
            carry = None
        if k not in marked or width(line) <= LIMIT:
            out.append(line)
            continue
        shrunk = wrap_line(line)[0]
        if width(shrunk) <= LIMIT:
            out.append(shrunk)
            continue
        p = prefix_of(line)
        m = COMMENT_LINE.match(line)
        cut = split_at(line, len(m.group(0))) if p else None
        if not cut:
            out.append(line)
            continue
        head, tail = cut
        out.append(head)
        if tail.endswith("*/") or k + 1 >= len(lines):
            rest = p + tail
            while width(rest) > LIMIT:
                c = split_at(rest, len(p))
                if not c:
                    break
                out.append(c[0])
                rest = p + c[1]
            out.append(rest)
        else:
            carry, cprefix = tail, p
    if carry is not None:
        out.append(cprefix + carry)
    return out


def wrap_changed(old, new):
    """new with its changed comment lines wrapped to LIMIT columns (the rewrite never adds
    or removes a line, so the lines pair up)."""
    a, b = old.split("\n"), new.split("\n")
    if len(a) != len(b):
        return new
    return "\n".join(wrap_lines(b, {k for k, (x, y) in enumerate(zip(a, b)) if x != y}))


def main(argv):
    check = "--check" in argv
    wrap_cited = "--wrap-cited" in argv
    args = [a for a in argv if a not in ("--check", "--wrap-cited")]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    changed, unmapped = [], []
    for rel in tracked(root):
        if rel.startswith(SKIP_DIRS) or rel in SKIP_FILES:
            continue
        base = os.path.basename(rel)
        if not (rel.endswith(TEXT_EXT) or base in ("CMakeLists.txt", "README", "run")):
            continue
        full = os.path.join(root, rel)
        if not os.path.isfile(full):
            continue
        try:
            with open(full, encoding="utf-8") as f:
                old = f.read()
        except UnicodeDecodeError:
            continue
        new = rewrite(rel, old, root)
        if rel.endswith((".c", ".h", "CMakeLists.txt")):
            if new != old:
                new = wrap_changed(old, new)
            if wrap_cited:
                lines = new.split("\n")
                new = "\n".join(wrap_lines(lines, {k for k, y in enumerate(lines)
                                                    if CITED_RE.search(y)}))
        if new != old:
            changed.append(rel)
            if not check:
                with open(full, "w", encoding="utf-8") as f:
                    f.write(new)
        for n, line in enumerate(new.splitlines(), 1):
            if OUTSIDE_RE.search(line):
                unmapped.append("%s:%d: %s" % (rel, n, line.strip()))
    for rel in changed:
        print(("would change " if check else "changed ") + rel)
    if unmapped:
        print("references outside the repository that fix-refs.py cannot map:")
        for u in unmapped:
            print("  " + u)
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
