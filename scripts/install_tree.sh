#!/usr/bin/env bash
# Lays out an installed ember under PREFIX from what //:libember built (library.bzl):
#   scripts/install_tree.sh --prefix PREFIX --built DIR --sources SRC
# DIR holds libember.so.<version>, libember.a and ember_headers.txt; SRC is the source tree the
# listed headers are read from (the repository, or a test's runfiles). Writes
#   PREFIX/include/ember/<header path>       include/ember/X.h as ember/X.h: <ember/X.h> to a user
#   PREFIX/lib/libember.so.<v>, .so.<major>, .so and libember.a
#   PREFIX/lib/cmake/ember/emberConfig.cmake, emberConfigVersion.cmake   (imported target ember::ember)
#   PREFIX/lib/pkgconfig/ember.pc
# scripts/install.sh builds and calls it; tests/scripts:install_test calls it on the built files.
set -euo pipefail
prefix="" built="" sources=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix) prefix="$2"; shift ;;
    --built) built="$2"; shift ;;
    --sources) sources="$2"; shift ;;
    *) echo "install_tree: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$prefix" && -d "$built" && -d "$sources" ]] || {
  echo "usage: scripts/install_tree.sh --prefix PREFIX --built DIR --sources SRC" >&2
  exit 2
}
so=$(cd "$built" && ls libember.so.*.*.* | head -1)
[[ -n "$so" ]] || { echo "install_tree: no libember.so.X.Y.Z in $built" >&2; exit 1; }
version="${so#libember.so.}" major="${version%%.*}"
mkdir -p "$prefix/include/ember" "$prefix/lib/cmake/ember" "$prefix/lib/pkgconfig"
prefix="$(cd "$prefix" && pwd)"

while read -r header; do
  [[ -n "$header" ]] || continue
  # The public headers' include path drops include/ (//:ember's strip_include_prefix).
  install -D -m 644 "$sources/$header" "$prefix/include/ember/${header#include/}"
done <"$built/ember_headers.txt"
install -m 755 "$built/$so" "$prefix/lib/$so"
ln -sf "$so" "$prefix/lib/libember.so.$major"
ln -sf "libember.so.$major" "$prefix/lib/libember.so"
install -m 644 "$built/libember.a" "$prefix/lib/libember.a"

# The CMake package: ember::ember carries the include directory, C++17 and fmt (the public
# headers use it); MPI, OpenMP and zlib are the shared library's own dependencies.
cat >"$prefix/lib/cmake/ember/emberConfig.cmake" <<CMAKE
# ember $version: find_package(ember) then target_link_libraries(app PRIVATE ember::ember).
include(CMakeFindDependencyMacro)
find_dependency(fmt)
get_filename_component(_ember_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET ember::ember)
  add_library(ember::ember SHARED IMPORTED)
  set_target_properties(ember::ember PROPERTIES
    IMPORTED_LOCATION "\${_ember_prefix}/lib/$so"
    IMPORTED_SONAME "libember.so.$major"
    INTERFACE_INCLUDE_DIRECTORIES "\${_ember_prefix}/include/ember"
    INTERFACE_COMPILE_FEATURES "cxx_std_17"
    INTERFACE_LINK_LIBRARIES "fmt::fmt")
endif()
unset(_ember_prefix)
set(ember_VERSION $version)
CMAKE
cat >"$prefix/lib/cmake/ember/emberConfigVersion.cmake" <<CMAKE
# Compatible: the same major version, at least the one asked for.
set(PACKAGE_VERSION $version)
if(PACKAGE_FIND_VERSION_MAJOR STREQUAL "$major" AND NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
CMAKE
cat >"$prefix/lib/pkgconfig/ember.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include/ember

Name: ember
Description: A C++17 deep-learning framework with data-parallel training
Version: $version
Requires: fmt
Libs: -L\${libdir} -lember
Cflags: -I\${includedir} -std=c++17
PC
echo "install_tree: ember $version in $prefix ($(wc -l <"$built/ember_headers.txt") headers)"
