# gen-syms.cmake: from wrap.def (the one list of wrapped names) writes
#   OUT_MAP   the version script: exactly these names global, everything else local;
#   OUT_REDEF the objcopy --redefine-syms map: "<name> smcr_real_<name>" per name;
#   OUT_LIST  the names, one per line, sorted (the exported-symbols test's expectation).
# Run as: cmake -DDEF=... -DOUT_MAP=... -DOUT_REDEF=... -DOUT_LIST=... -P gen-syms.cmake
file(STRINGS ${DEF} _lines REGEX "^[WV]\\(")
set(_names)
foreach(l ${_lines})
  string(REGEX REPLACE "^[WV]\\([^,]+, *([A-Za-z0-9_]+),.*" "\\1" n "${l}")
  list(APPEND _names ${n})
endforeach()
list(SORT _names)
set(_map "/* generated from src/preload/wrap.def: the wrapped names, and nothing else */\n{\n  global:\n")
set(_redef "")
set(_list "")
foreach(n ${_names})
  string(APPEND _map "    ${n};\n")
  string(APPEND _redef "${n} smcr_real_${n}\n")
  string(APPEND _list "${n}\n")
endforeach()
string(APPEND _map "  local: *;\n};\n")
file(WRITE ${OUT_MAP} "${_map}")
file(WRITE ${OUT_REDEF} "${_redef}")
file(WRITE ${OUT_LIST} "${_list}")
