#!/usr/bin/env bash
# ember as a library outside its repository: //:libember laid out by
# scripts/install_tree.sh under a temporary prefix; examples/out_of_tree built against it with plain
# CMake (find_package(ember)) and run under mpirun at 2 ranks (it trains, its loss falls, it writes
# its checkpoint); the same program built with g++ and pkg-config; libember.so exports ember's
# symbols and none of Eigen's or the standard library's template instances.
# usage: install_test.sh INSTALL_TREE_SH OUT_OF_TREE_CMAKELISTS LIBEMBER_FILES...
source "$(dirname "$0")/../examples/lib.sh"
install_tree="$(realpath "$1")" project="$(dirname "$(realpath "$2")")" built="$(cd "$(dirname "$3")" && pwd)"
# The headers the list names, from the runfiles (this test's data), which mirror the source tree.
sources="$(cd "$(dirname "$0")/../.." && pwd)"

run install 120 "$install_tree" --prefix "$work/prefix" --built "$built" --sources "$sources"
expect_success install
[[ -f "$work/prefix/include/ember/ember/ember.h" && -L "$work/prefix/lib/libember.so" &&
   -f "$work/prefix/lib/libember.a" && -f "$work/prefix/lib/cmake/ember/emberConfig.cmake" &&
   -f "$work/prefix/lib/pkgconfig/ember.pc" ]]
check "the prefix holds <ember/ember.h>, libember.so (a link), libember.a, the CMake and pkg-config files" $?

# Exports: ember's own symbols; no Eigen, fmt or std:: template instance defined in the library.
nm -D --defined-only "$work/prefix/lib/libember.so" | awk '{print $3}' >"$work/exports.txt"
exported=$(wc -l <"$work/exports.txt")
grep -q '^_ZN5ember6matmulERKNS_6TensorES2_' "$work/exports.txt" && grep -q '_ZN5ember11distributed23DistributedDataParallel' "$work/exports.txt"
check "libember.so exports ember::matmul and DistributedDataParallel ($exported symbols)" $?
foreign=$(grep -v -e '^_ZN5ember' -e '^_ZNK5ember' -e '^_ZT[ISVT]N5ember' -e '^_ZGVZ\?N5ember' -e '^_ZTh' -e '^_ZTv' \
  -e '^EMBER_0$' "$work/exports.txt" | head -5)
[[ "$exported" -gt 0 && -z "$foreign" ]]
check "no other symbol is exported (found: ${foreign:-none})" $?
# Read whole first: grep -q would stop reading early, and objdump's SIGPIPE fail the pipeline.
dynamic=$(objdump -p "$work/prefix/lib/libember.so")
grep -q 'SONAME *libember.so.0' <<<"$dynamic"
check "its soname is libember.so.0" $?

# The out-of-tree project with CMake, exactly as the README says (but against this prefix).
cp -r "$project" "$work/project"
run cmake 300 cmake -S "$work/project" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
expect_success cmake
run build 300 cmake --build "$work/build"
expect_success build
run trainer 120 "${MPIRUN[@]}" -np 2 "$work/build/my_trainer" "$work/model.safetensors"
expect_my_trainer_trained trainer "$work/model.safetensors" "my_trainer (CMake)"

# The same source with pkg-config and g++ -O2 and no -march (the library dispatches on the CPU).
run pkgconfig 300 env PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" bash -c \
  "g++ -O2 -o '$work/pc_trainer' '$work/project/main.cc' \$(pkg-config --cflags --libs ember) -Wl,-rpath,'$work/prefix/lib'"
expect_success pkgconfig
run pc_trainer 120 "${MPIRUN[@]}" -np 2 "$work/pc_trainer" "$work/pc.safetensors"
expect_my_trainer_trained pc_trainer "$work/pc.safetensors" "my_trainer (pkg-config)"
finish
