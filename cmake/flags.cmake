# Compiler flags shared by every target (STYLE.md, "Build hygiene").
set(SMCR_WARNINGS
  -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wformat=2 -Wswitch-enum -Wno-format-nonliteral)
add_compile_options(${SMCR_WARNINGS})
# POSIX + GNU extensions we use (memfd_create, accept4, ...) are asked for per file with
# _GNU_SOURCE; the language stays C11.
if(NOT SMCR_ASAN AND NOT SMCR_TSAN AND NOT SMCR_FUZZ AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  add_compile_definitions(_FORTIFY_SOURCE=2)
endif()

# A profile's call graphs (perf record -g) need frame pointers in an optimized build.
if(SMCR_FRAME_POINTERS)
  add_compile_options(-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
endif()

if(SMCR_ASAN AND SMCR_TSAN)
  message(FATAL_ERROR "SMCR_ASAN and SMCR_TSAN are exclusive")
endif()
if(SMCR_ASAN)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${_san})
  add_link_options(${_san})
endif()
if(SMCR_TSAN)
  set(_san -fsanitize=thread -fno-omit-frame-pointer)
  add_compile_options(${_san})
  add_link_options(${_san})
endif()
if(SMCR_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SMCR_FUZZ needs clang (CC=clang)")
  endif()
  # Everything is built with coverage instrumentation; the fuzz targets add -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
