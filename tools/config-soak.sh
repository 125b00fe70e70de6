#!/bin/bash
# Run whole training programs under random compile configurations and check
# each against its reference (ONNX Runtime's, or the generator's numpy one):
#
#   tools/config-soak.sh <strata binary> <seed> <rounds> [shared dir, default ../shared]
#
# Each round takes every program (examples/mlp, examples/ort/* but the *_big
# ones, and with the shared directory the Deeploy training programs) once,
# with an L1 drawn between the program's least (read from the error of a
# compile at --l1 16) and twice that, single or double buffering, default
# level L2 or L3, half of the time an L2 of 1,000 to 61,000 bytes, and
# engine sim (5 in 6) or the compiled C for the host or PULP target. Prints
# one line per run: "ok", "nofit" (strata refused, saying by how many bytes
# the program is short: an answer, not a failure) or "FAIL" with the
# command and the first lines of its output. Exit 0 exactly when nothing
# failed and something ran. The same seed draws the same configurations.
set -u
[ $# -ge 3 ] || { sed -n 2,16p "$0"; exit 2; }
S=$(realpath "$1"); RANDOM=$2; ROUNDS=$3
cd "$(dirname "$0")/.."
SHARED=$(realpath "${4:-../shared}" 2>/dev/null || true)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
progs=(examples/mlp)
for d in examples/ort/*/; do case $d in *_big/) continue ;; esac; progs+=("${d%/}"); done
if [ -n "$SHARED" ] && [ -d "$SHARED/fixtures/deeploy/Training" ]; then
    for d in "$SHARED"/fixtures/deeploy/Training/*/; do progs+=("${d%/}"); done
else
    echo "skipped: the Deeploy training programs (no shared directory)"
fi
declare -A LEAST
for d in "${progs[@]}"; do
    LEAST[$d]=$("$S" compile "$d" --l1 16 -o "$WORK/least" 2>&1 |
        grep -o "needs at least [0-9]*" | grep -o "[0-9]*$")
    [ -n "${LEAST[$d]}" ] || { echo "FAIL $d: no least L1 in the error of --l1 16"; exit 1; }
done
ran=0; failed=0
for _ in $(seq 1 "$ROUNDS"); do
    for d in "${progs[@]}"; do
        least=${LEAST[$d]}
        l1=$((least + (RANDOM * 32768 + RANDOM) % (least + 1)))
        b=$([ $((RANDOM % 2)) = 0 ] && echo single || echo double)
        lv=$([ $((RANDOM % 3)) = 0 ] && echo l3 || echo l2)
        l2=(); [ $((RANDOM % 2)) = 0 ] && l2=(--l2 $((1000 + (RANDOM * 32768 + RANDOM) % 60000)))
        eng=(--engine sim)
        [ $((RANDOM % 6)) = 0 ] && eng=(--engine c --target "$([ $((RANDOM % 2)) = 0 ] && echo pulp || echo host)")
        args=(check "$d" "${eng[@]}" --l1 "$l1" --buffering "$b" --default-level "$lv" "${l2[@]}" --workdir "$WORK/run")
        out=$("$S" "${args[@]}" 2>&1)
        rc=$?
        ran=$((ran + 1))
        if [ $rc = 0 ]; then
            echo "ok    ${args[*]:0:${#args[@]}-2}"
        elif echo "$out" | grep -q "bytes short"; then
            echo "nofit ${args[*]:0:${#args[@]}-2}: $(echo "$out" | grep "bytes short" | head -1)"
        else
            failed=$((failed + 1))
            echo "FAIL (exit $rc) ${args[*]:0:${#args[@]}-2}"
            echo "$out" | grep -v "^ " | head -5 | sed 's/^/    /'
        fi
    done
done
echo "$ran runs, $failed failed"
[ "$ran" -gt 0 ] && [ "$failed" = 0 ]
