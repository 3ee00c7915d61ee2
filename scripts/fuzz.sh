#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, ASan and UBSan into build-fuzz/ and runs each
# for N seconds from a writable copy of its seed corpus (the seeds in git stay as they are).
# Prints each target's executions; exits non-zero naming the target and its crash file if one
# crashed. Fix the cause, then copy the crash file to fuzz/regressions/<target>/ under a name
# that says what it is: the normal build replays it (ctest -R fuzz_regression).
#   scripts/fuzz.sh [--seconds N] [TARGET...]     (N defaults to 30; all targets by default)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    -h | --help) sed -n 2,7p "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fuzz_wire_decode fuzz_ps_handle fuzz_server_task fuzz_tfrecord fuzz_idx fuzz_config
    fuzz_host_hub)
fi

# Every library the targets link is instrumented too, so coverage guides the fuzzer into them;
# UBSan findings abort, so that libFuzzer keeps them as crashes.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
# Sanitizers keep "omp simd" loops from vectorising; that warning is noise here.
flags+=" -fno-omit-frame-pointer -Wno-pass-failed"
mkdir -p build-fuzz
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPSTRAIN_CUDA=OFF -DPSTRAIN_FUZZ=ON \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >build-fuzz/configure.log 2>&1 ||
  { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

mkdir -p build-fuzz/artifacts build-fuzz/logs
# One target: its exit status goes to build-fuzz/logs/<target>.rc.
run_target() {
  local t="$1" corpus="build-fuzz/corpus/$1"
  rm -rf "$corpus" build-fuzz/artifacts/"$t"-*
  mkdir -p "$corpus"
  cp fuzz/corpus/"$t"/* "$corpus"/
  local extra=()
  # Crashes found before run first; new inputs are written to the first directory only.
  [[ -d fuzz/regressions/$t ]] && extra+=("fuzz/regressions/$t")
  [[ -f fuzz/dicts/$t.dict ]] && extra+=("-dict=fuzz/dicts/$t.dict")
  local rc=0
  build-fuzz/fuzz/"$t" -max_total_time="$seconds" -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/"$t"- "$corpus" "${extra[@]}" \
    >build-fuzz/logs/"$t".log 2>&1 || rc=$?
  echo "$rc" >build-fuzz/logs/"$t".rc
}

# As many targets at a time as there are cores (libFuzzer runs on one).
for t in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $(nproc) ]]; do wait -n || true; done
  echo "fuzz: running $t for ${seconds}s"
  run_target "$t" &
done
wait

failed=0
for t in "${targets[@]}"; do
  log=build-fuzz/logs/$t.log
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  if [[ "$(cat build-fuzz/logs/"$t".rc)" == "0" ]]; then
    echo "fuzz: $t: ${execs:-?} executions in ${seconds}s, no crash"
    continue
  fi
  failed=1
  # Only this run's: the target's artifacts were removed before it started.
  crash=$(find build-fuzz/artifacts -maxdepth 1 -type f \( -name "$t-crash-*" -o \
    -name "$t-leak-*" -o -name "$t-timeout-*" -o -name "$t-oom-*" \) | head -1)
  echo "fuzz: $t CRASHED after ${execs:-?} executions; input: ${crash:-none written}; log: $log"
  grep -a -m1 -B2 -A25 -E "==ERROR|runtime error|Check failed|ERROR: libFuzzer" "$log" ||
    tail -40 "$log"
done
exit "$failed"
