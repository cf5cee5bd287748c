# Installing attnviz like a desktop program: man pages made from the programs' --help, the
# desktop entry and icon, and CPack's Debian package (`cpack -G DEB` in the build folder).
# Included at the end of the top-level CMakeLists.txt, after every install() rule.
#
# The package installs to /usr: bin/attnviz, bin/attnviz-cli, share/attnviz/ (exactly what
# `cmake --install` puts there), share/applications/attnviz.desktop,
# share/icons/hicolor/scalable/apps/attnviz.svg, share/man/man1/attnviz{,-cli}.1.gz.

# --- man pages, written at build time by scripts/help2man.sh from each program's --help
# (and re-written whenever the program is rebuilt).
set(_attnviz_man_dir "${PROJECT_BINARY_DIR}/man")
set(_attnviz_programs attnviz-cli)
if(TARGET attnviz)
  list(APPEND _attnviz_programs attnviz)
endif()
set(_attnviz_man_pages "")
foreach(_prog IN LISTS _attnviz_programs)
  set(_see_also "")
  foreach(_other IN LISTS _attnviz_programs)
    if(NOT _other STREQUAL _prog)
      list(APPEND _see_also "${_other}(1)")
    endif()
  endforeach()
  set(_page "${_attnviz_man_dir}/${_prog}.1.gz")
  add_custom_command(OUTPUT "${_page}"
    # (leak checking off: in a sanitizer build a leak report at exit would fail the build step)
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0 bash "${PROJECT_SOURCE_DIR}/scripts/help2man.sh"
            "$<TARGET_FILE:${_prog}>" "${_prog}"
            "${PROJECT_VERSION}" "${_page}" ${_see_also}
    DEPENDS ${_prog} "${PROJECT_SOURCE_DIR}/scripts/help2man.sh"
    COMMENT "Writing the man page ${_prog}.1.gz from '${_prog} --help'"
    VERBATIM)
  list(APPEND _attnviz_man_pages "${_page}")
endforeach()
add_custom_target(attnviz_man_pages ALL DEPENDS ${_attnviz_man_pages})
install(FILES ${_attnviz_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# --- desktop entry and icon (for the GUI only)
if(TARGET attnviz)
  install(FILES "${PROJECT_SOURCE_DIR}/packaging/attnviz.desktop" DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES "${PROJECT_SOURCE_DIR}/packaging/attnviz.svg"
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()

# --- the Debian package
# Depends: the Debian 12 runtime packages of every library the binaries link (readelf -d …
# | grep NEEDED, then dpkg -S), with the lowest versions dpkg-shlibdeps asks for, plus the
# libraries opened at run time: libEGL.so.1 (the GPU backend, through libepoxy) and libGL.so.1
# (GLFW's GLX). tests/package_check.sh fails when a NEEDED library's package is missing here.
set(_deps
  "libc6 (>= 2.34)" "libstdc++6 (>= 12)" "libgcc-s1 (>= 3.0)" "libgomp1 (>= 6)"
  "libpcre2-8-0 (>= 10.22)" "libutf8proc2 (>= 1.3)" "libsentencepiece0 (>= 0.1.97)"
  "libstb0 (>= 0.0~git20180212.15.e6afb9c)" "libfontconfig1 (>= 2.12.6)")
if(ATTNVIZ_GPU)
  list(APPEND _deps "libepoxy0 (>= 1.0)" "libegl1")
endif()
if(TARGET attnviz)
  list(APPEND _deps "libglfw3 (>= 3.3)" "libopengl0" "libgl1")
endif()
if(ATTNVIZ_BLAS_USED STREQUAL "openblas")  # core/CMakeLists.txt: the matrix products' library
  list(APPEND _deps "libopenblas0-openmp | libopenblas0")
elseif(ATTNVIZ_BLAS_USED STREQUAL "blis")
  list(APPEND _deps "libblis4-openmp | libblis4")
endif()
list(JOIN _deps ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
# Fonts: CJK glyphs for the Chinese model's tokens, DejaVu otherwise; Mesa's drivers, so that
# OpenGL (and the GPU backend's llvmpipe) work on any machine.
set(_recommends fonts-noto-cjk fonts-dejavu-core)
if(ATTNVIZ_GPU OR TARGET attnviz)
  list(APPEND _recommends libgl1-mesa-dri libegl-mesa0)
endif()
# The Python module (import attnviz) ships inside this package, in
# /usr/lib/python3/dist-packages/attnviz/: it is the same engine, built in the same build, and
# a version of it must never run against another's data. Python and numpy are recommended,
# not required: the desktop program and attnviz-cli run without them.
if(ATTNVIZ_PYTHON_BUILT)
  list(APPEND _recommends python3 python3-numpy)
endif()
list(JOIN _recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)  # the list above is the whole of Depends

set(ATTNVIZ_DEB_MAINTAINER "attnviz maintainers <attnviz@example.org>" CACHE STRING
    "Maintainer field of the Debian package (Name <email>)")
set(CPACK_PACKAGE_NAME attnviz)
set(CPACK_PACKAGE_VENDOR attnviz)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${ATTNVIZ_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${ATTNVIZ_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "watch causal self-attention work, live, as you type")
set(CPACK_PACKAGE_DESCRIPTION
  "attnviz runs a small causal transformer (GPT-2, Llama, Qwen2 style; safetensors or GGUF) on the CPU or on the GPU through OpenGL compute shaders, and records every step of attention for every layer and head: Q, K and V, the raw, scaled and masked scores, the softmax weights and each head's output.\n\nThe desktop application attnviz shows them as heatmaps that update while you type. The command-line tool attnviz-cli dumps, exports, trains and benchmarks them. Two small built-in models are included.")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # attnviz_X.Y.Z_ARCH.deb
# gzip: about 1 s here for a 7 MB package; CPack's own xz gives 5.6 MB but takes over a minute.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
if(ATTNVIZ_NATIVE)
  message(STATUS "attnviz: ATTNVIZ_NATIVE=ON builds for this CPU only; configure with "
                 "-DATTNVIZ_NATIVE=OFF for a package to install on other machines")
endif()
include(CPack)
