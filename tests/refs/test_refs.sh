#!/usr/bin/env bash
# test_refs.sh SRC_ROOT: scripts/check-refs.sh rejects what a clone cannot follow, and
# scripts/fix-refs.py rewrites the old outside names to the repository's pages, exactly and
# only once (a second run changes nothing). Runs on a scratch git tree in a temporary
# directory (removed at exit), holding copies of the scripts and of the pages they map to.
set -euo pipefail
src=$(cd "${1:?SRC_ROOT}" && pwd)
command -v git >/dev/null && command -v python3 >/dev/null ||
  { echo "SKIP: git and python3 are needed"; exit 77; }
t=$(mktemp -d /tmp/smcr-test-refs.XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cd "$t"
git init -q .
mkdir -p scripts src
cp "$src"/scripts/fix-refs.py "$src"/scripts/check-refs.sh scripts/
cp -r "$src"/docs .   # the pages the citations map to, and what those pages cite
cp "$src"/README.md .
cat > src/a.c <<'C'
/* a.c: framing (wire-formats.md 2.1, 2.4); server (procedures.md 2.3);
 * ids (spec linux-interop.md 5); the fd (ENGINE.md decision 2);
 * whole (/work/shared/spec/procedures.md); bpf (shared/notes/tcp-option-bpf.md). */
int a;
C
cat > src/w.c <<'C'
/* w.c: a comment whose line gets too wide once its citation of procedures.md 2.3 is rewritten,
 * and a second line it continues on. */
/* ---- a banner (procedures.md 4) ------------------------------------------------------- */
int w;
C
cat > docs/parts/b.md <<'M'
See [the CDC](wire-formats.md) and ../shared/spec/wireshark.md 6.1, and conns.md "Round 5".
M
cat > docs/history/c.md <<'M'
Measured as in [robust](robust.md) and [conns](conns.md).
M
git add -A

# 1. The check rejects every old name.
if out=$(scripts/check-refs.sh . 2>&1); then fail "check-refs passed on old names"; fi
for n in wire-formats.md procedures.md linux-interop.md ENGINE.md /work/ shared/ wireshark.md; do
  grep -qF -- "$n" <<<"$out" || fail "check-refs did not name $n: $out"
done
grep -q 'docs/history/c.md:1: links to robust.md' <<<"$out" || fail "moved page's link not flagged: $out"

# 2. fix-refs rewrites them, exactly.
python3 scripts/fix-refs.py . >/dev/null
exp_a='/* a.c: framing (docs/protocol/wire-formats.md 2.1, 2.4); server (docs/protocol/procedures.md 2.3);
 * ids (docs/protocol/linux-interop.md 5); the fd (docs/design/engine-decisions.md decision 2);
 * whole (docs/protocol/procedures.md); bpf (docs/protocol/tcp-option-bpf.md). */
int a;'
[ "$(cat src/a.c)" = "$exp_a" ] || fail "src/a.c: $(cat src/a.c)"
exp_w='/* w.c: a comment whose line gets too wide once its citation of docs/protocol/procedures.md 2.3 is
 * rewritten, and a second line it continues on. */
/* ---- a banner (docs/protocol/procedures.md 4) ------------------------------------------------ */
int w;'
[ "$(cat src/w.c)" = "$exp_w" ] || fail "src/w.c: $(cat src/w.c)"
exp_b='See [the CDC](../protocol/wire-formats.md) and docs/protocol/wireshark.md 6.1, and ../history/conns.md "Round 5".'
[ "$(cat docs/parts/b.md)" = "$exp_b" ] || fail "docs/parts/b.md: $(cat docs/parts/b.md)"
exp_c='Measured as in [robust](../parts/robust.md) and [conns](conns.md).'
[ "$(cat docs/history/c.md)" = "$exp_c" ] || fail "docs/history/c.md: $(cat docs/history/c.md)"

# 3. Now the check passes, and a second run changes nothing.
scripts/check-refs.sh . || fail "check-refs failed after fix-refs"
out=$(python3 scripts/fix-refs.py --check .) || fail "fix-refs --check: a second run would change: $out"
grep -q 'would change' <<<"$out" && fail "a second run would change: $out"

# 4. A section or a page that does not exist is rejected.
echo '/* see docs/protocol/procedures.md 9.9 */' > src/d.c
echo 'See docs/parts/nothing.md.' > docs/parts/e.md
git add -A
if out=$(scripts/check-refs.sh . 2>&1); then fail "check-refs passed a missing section/page"; fi
grep -q 'src/d.c:1: cites docs/protocol/procedures.md 9.9' <<<"$out" || fail "missing section: $out"
grep -q 'docs/parts/e.md:1: cites docs/parts/nothing.md' <<<"$out" || fail "missing page: $out"
echo "PASS"
