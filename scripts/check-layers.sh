#!/usr/bin/env bash
# check-layers.sh SRC_ROOT: fails when a file includes a header of a layer it may not use.
# The table below is the layering of docs/ARCHITECTURE.md; keep the two in step.
# Includes are written "layer/file.h" relative to src/ (or <smcr/x.h> for the public API).
set -euo pipefail
root=${1:-$(dirname "$0")/..}
cd "$root"

# layer -> layers it may include (itself included)
declare -A allow=(
  [util]="util"
  [wire]="wire util"
  [dev]="dev util"
  [dev/shm]="dev/shm dev util"
  [dev/emu]="dev/emu dev util"
  [dev/verbs]="dev/verbs dev util"
  [core]="core wire dev util smcr"
  [sock]="sock core wire dev dev/shm dev/emu dev/verbs bpf util smcr"
  [preload]="preload sock util smcr"
  [bpf]="bpf util"
  [tools]="tools wire bpf util smcr"
)

layer_of() { # path relative to src/ of an included header -> its layer
  case "$1" in
    dev/shm/*) echo dev/shm ;; dev/emu/*) echo dev/emu ;; dev/verbs/*) echo dev/verbs ;;
    smcr/*) echo smcr ;;
    */*) echo "${1%%/*}" ;;
    *) echo "?" ;;
  esac
}

bad=0
check_dir() { # dir layer
  local dir=$1 layer=$2 f inc dep
  [ -d "$dir" ] || return 0
  while IFS= read -r f; do
    # the file's own layer is the deepest known folder it sits in
    local own=$layer
    case "$f" in src/dev/shm/*) own=dev/shm ;; src/dev/emu/*) own=dev/emu ;; src/dev/verbs/*) own=dev/verbs ;; esac
    while IFS= read -r inc; do
      dep=$(layer_of "$inc")
      [ "$dep" = "?" ] && continue   # a same-folder include without a layer prefix
      if [[ " ${allow[$own]} " != *" $dep "* ]]; then
        echo "layering: $f ($own) includes \"$inc\" ($dep), which $own may not use" >&2
        bad=1
      fi
    done < <(sed -n -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/p' "$f" \
             | grep -E '^(util|wire|dev|core|sock|preload|bpf|tools|smcr)/' || true)
  done < <(find "$dir" -name '*.[ch]' -not -name '*.bpf.c' | sort)
}

for l in util wire dev core sock preload bpf; do check_dir "src/$l" "$l"; done
check_dir tools tools

# No relative climbing: an include names its layer ("layer/file.h"), never "../".
while IFS= read -r hit; do
  echo "layering: $hit: includes with \"../\" (name the layer instead)" >&2
  bad=1
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]*\.\./' src tools tests bench \
         --include='*.c' --include='*.h' 2>/dev/null || true)
exit $bad
