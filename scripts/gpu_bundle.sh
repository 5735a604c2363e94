#!/usr/bin/env bash
# Packs the GPU suites and benchmarks for a machine that has a GPU but no Bazel, no Debian
# libraries and no Debian OpenMPI (the H100/H200 machines lent to some sessions): the
# --config=cuda binaries of every test tagged "cuda", of the CPU op suites that run once per
# capability level (tests/common/cpu_capability_test.bzl: their AVX-512 copies skip on a CPU
# without it, and the GPU machine's Xeon has it) and of the GPU and CPU benchmarks, the shared
# libraries they load besides glibc, libstdc++ and CUDA's own (cudart, cuBLAS, NCCL: the GPU
# machine has those), OpenMPI with its plugins under a prefix of its own (OPAL_PREFIX), and the
# CUDA version the binaries are built with (cuda_version: gpu_check.sh refuses an older driver).
#   scripts/gpu_bundle.sh            -> .gpu/bundle.tar.xz (about 29 MB)
# Then, there, from the repository root: scripts/gpu_check.sh (see its header).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
stage="$out/stage"
bin=bazel-out/k8-fastbuild/bin  # the CUDA config shares the default output tree (.bazelrc)
mapfile -t tests < <(bazel query 'attr(tags, "cuda", tests(//...))' 2>/dev/null)
# One copy of each per-level suite: the level is EMBER_CPU_CAPABILITY's, set by gpu_check.sh.
mapfile -t level_tests < <(bazel query 'attr(name, "_avx512$", tests(//...))' 2>/dev/null)
benches=(//bench:gpu_bench //bench:ddp_bench //bench:nccl_allreduce_bench //bench:resnet_train_bench
  //bench:gemm_bench //bench:conv_bench)
bazel build --config=cuda "${tests[@]}" "${level_tests[@]}" "${benches[@]}"
# The toolkit --config=cuda builds with (the @cuda repository's: CUDA_PATH, else /usr/local/cuda).
cuda_h="${CUDA_PATH:-/usr/local/cuda}/include/cuda.h"
cuda_version=$(awk '$1 == "#define" && $2 == "CUDA_VERSION" { printf "%d.%d", $3 / 1000, $3 % 1000 / 10 }' "$cuda_h")
[[ -n "$cuda_version" ]] || { echo "gpu_bundle: no CUDA_VERSION in $cuda_h" >&2; exit 1; }

rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/cpu" "$stage/bench" "$stage/lib" "$stage/ompi"
built=()
for t in "${tests[@]}"; do
  path="${t#//}"; path="${path/://}"
  # An mpi_test's sh_tests (NAME_npN) run NAME_bin; the trainers' tests and the bench smoke tests
  # are scripts around binaries that gpu_check.sh runs itself.
  [[ "$path" =~ _np[0-9]+$ ]] && path="${path%_np*}_bin"
  [[ -f "$bin/$path" && ! "$path" =~ (device_test|smoke_test|rank_death) ]] || continue
  [[ -e "$stage/tests/$(basename "$path")" ]] && continue
  cp "$bin/$path" "$stage/tests/"
  built+=("$bin/$path")
done
for t in "${level_tests[@]}"; do
  path="${t#//}"; path="${path/://}"
  cp "$bin/$path" "$stage/cpu/$(basename "${path%_avx512}")"
  built+=("$bin/$path")
done
for b in "${benches[@]}"; do
  cp "$bin/bench/${b#//bench:}" "$stage/bench/"
  built+=("$bin/bench/${b#//bench:}")
done
strip --strip-debug "$stage"/tests/* "$stage"/cpu/* "$stage"/bench/*
echo "$cuda_version" >"$stage/cuda_version"

# Libraries from Debian and Bazel's _solib (fastbuild links tests against per-target .so files),
# resolved from the binaries where they were built.
system='/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so|/usr/local/cuda|/libcuda\.so|/libnccl\.so|/libcublas|/libcudart'
copy_libs() { awk '/=> \//{print $3}' | sort -u | grep -v -E "$system" |
  while read -r l; do [[ -e "$stage/lib/$(basename "$l")" ]] || cp -L "$l" "$stage/lib/"; done; }
ldd "${built[@]}" | copy_libs

# OpenMPI (Debian's layout under OPAL_PREFIX) and PMIx's plugins.
o="$stage/ompi"
mkdir -p "$o/bin" "$o/lib/x86_64-linux-gnu/openmpi/lib" "$o/share" "$o/pmix"
cp /usr/bin/orterun /usr/bin/orted "$o/bin/"
ln -s orterun "$o/bin/mpirun"
cp -a /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 "$o/lib/x86_64-linux-gnu/openmpi/lib/"
cp -a /usr/share/openmpi "$o/share/"
cp -a /usr/lib/x86_64-linux-gnu/pmix2/lib /usr/lib/x86_64-linux-gnu/pmix2/share "$o/pmix/"
rm -f "$o/pmix/lib/libpmix.a"
{ ldd "$o"/bin/orterun "$o"/bin/orted "$o"/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so \
    "$o"/pmix/lib/pmix/*.so 2>/dev/null || true; } | copy_libs

tar -C "$stage" -cf - . | xz -T2 -6 >"$out/bundle.tar.xz"
rm -rf "$stage"
echo "$out/bundle.tar.xz: $(du -h "$out/bundle.tar.xz" | cut -f1), ${#built[@]} binaries, CUDA $cuda_version"
