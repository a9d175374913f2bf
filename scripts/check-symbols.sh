#!/usr/bin/env bash
# check-symbols.sh LAYER=LIB.a ...: the layering of docs/ARCHITECTURE.md at link level. Fails
# when a library references (nm: undefined) a symbol that a library of a layer it may not use
# defines: an include the header check (check-layers.sh) cannot see, such as a prototype
# declared by hand. The table is check-layers.sh's; keep the two in step.
set -euo pipefail
declare -A allow=(
  [util]="util"
  [wire]="wire util"
  [dev]="dev util"
  [dev/shm]="dev/shm dev util"
  [dev/emu]="dev/emu dev util"
  [dev/verbs]="dev/verbs dev util"
  [core]="core wire dev util"
  [sock]="sock core wire dev dev/shm dev/emu dev/verbs bpf util"
  [bpf]="bpf util"
)
declare -A owner=()   # symbol -> layer that defines it
declare -A lib=()
for arg in "$@"; do
  layer=${arg%%=*} path=${arg#*=}
  lib[$layer]=$path
  while read -r sym; do owner[$sym]=$layer; done < <(nm -g --defined-only "$path" 2>/dev/null |
    awk 'NF == 3 && $2 ~ /^[TDBRVW]$/ { print $3 }')
done
bad=0
for layer in "${!lib[@]}"; do
  while read -r sym; do
    def=${owner[$sym]:-}
    [ -z "$def" ] && continue   # libc, libpthread, the sanitizers
    if [[ " ${allow[$layer]} " != *" $def "* ]]; then
      echo "layering: ${lib[$layer]} ($layer) references $sym, defined in $def" >&2
      bad=1
    fi
  done < <(nm -u "${lib[$layer]}" 2>/dev/null | awk '$1 == "U" && NF == 2 { print $2 }' | sort -u)
done
exit $bad
