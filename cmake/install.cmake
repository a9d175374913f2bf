# install.cmake: what `cmake --install` puts under CMAKE_INSTALL_PREFIX (any prefix; the
# .deb of scripts/build-deb.sh uses /usr), GNU directory names:
#   lib/<arch>/libsmcr.so.0.1.0, .so.0 (soname), .so   the library (include/smcr/smcr.h's calls)
#   lib/<arch>/pkgconfig/smcr.pc                       pkg-config --cflags --libs smcr
#   include/smcr/smcr.h                                the API
#   bin/smcr-perf, smcr-decode, smcr-run; sbin/smcr-bpf the tools (those that are built)
#   lib/smcr/libsmcr-preload.so                        the interposer (smcr-run finds it
#                                                      there: <bindir>/../lib/smcr)
#   lib/smcr/bpf/smcr_opt.bpf.o                        the BPF programs (smcr-bpf embeds
#                                                      them; the object is for bpftool users)
#   share/man/man1,7,8/                                the pages of docs/man
# Invoked from the top-level CMakeLists.txt after every folder is configured.
include(GNUInstallDirs)

if(TARGET smcr)
  install(TARGETS smcr LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          NAMELINK_COMPONENT dev)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/smcr DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT dev FILES_MATCHING PATTERN "*.h")
  # pkg-config: relative to the prefix the .pc file itself lives under, so a prefix moved
  # after installation (DESTDIR staging, a relocated tree) still resolves.
  file(RELATIVE_PATH _pc_up ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
  set(SMCR_PC_PREFIX "\${pcfiledir}/${_pc_up}")
  string(REGEX REPLACE "/$" "" SMCR_PC_PREFIX "${SMCR_PC_PREFIX}")
  configure_file(${CMAKE_SOURCE_DIR}/cmake/smcr.pc.in ${CMAKE_BINARY_DIR}/smcr.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/smcr.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT dev)
endif()

foreach(t smcr-perf smcr-decode smcr-run)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
if(TARGET smcr-bpf)
  install(TARGETS smcr-bpf RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
endif()
if(TARGET smcr-preload)
  install(TARGETS smcr-preload LIBRARY DESTINATION lib/smcr)
endif()
if(SMCR_HAVE_BPF_PROG AND SMCR_BPF_OBJ)
  install(FILES ${SMCR_BPF_OBJ} DESTINATION lib/smcr/bpf)
endif()

file(GLOB _pages ${CMAKE_SOURCE_DIR}/docs/man/*.[1-8])
foreach(p ${_pages})
  string(REGEX REPLACE ".*\\.([1-8])$" "\\1" _sec ${p})
  install(FILES ${p} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_sec})
endforeach()
