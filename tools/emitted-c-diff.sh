#!/bin/bash
# Compile the same inputs with two strata binaries and compare the emitted C
# projects byte for byte (a refactoring of the emitter must not change them).
#
#   tools/emitted-c-diff.sh <strata before> <strata after> [shared dir, default ../shared]
#
# Inputs: examples/mlp (also --untiled and with every tensor in L3), every
# examples/ort program but the *_big ones (vit also at L3 / L1 64000), every
# examples/import graph, and when the shared directory has them the Deeploy
# training programs (ResNet8 also at L3 / L1 64000 / single) and kernel tests.
# Exit 0 exactly when every project is identical.
set -u
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2")
cd "$(dirname "$0")/.."
SHARED=$(realpath "${3:-../shared}" 2>/dev/null || true)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
inputs=()
add() { inputs+=("$*"); }
add mlp examples/mlp
add mlp_untiled examples/mlp --untiled
add mlp_l3 examples/mlp --default-level l3 --buffering single
for d in examples/ort/*/; do
    n=$(basename "$d"); case $n in *_big) continue ;; esac
    add "ort_$n" "$d"
done
add ort_vit_l3 examples/ort/vit --default-level l3 --l1 64000
for d in examples/import/*/; do add "imp_$(basename "$d")" "$d/network.onnx"; done
D="$SHARED/fixtures/deeploy"
if [ -n "$SHARED" ] && [ -d "$D" ]; then
    for d in "$D"/Training/*/; do add "tr_$(basename "$d")" "$d"; done
    add tr_ResNet8_l3 "$D/Training/ResNet8" --default-level l3 --l1 64000 --buffering single
    while read -r f; do
        n=$(echo "${f#"$D"/Kernels/}" | sed 's,/network.onnx,,; s,/,_,g')
        add "k_$n" "$f"
    done < <(find "$D/Kernels" -name network.onnx | sort)
else
    echo "note: no $D; the Deeploy programs are not compared" >&2
fi
mkdir -p "$WORK/before" "$WORK/after"
status=0
for i in "${inputs[@]}"; do
    read -r -a a <<<"$i"
    name=${a[0]}
    for side in before after; do
        bin=$BEFORE; [ $side = after ] && bin=$AFTER
        if ! "$bin" compile "${a[@]:1}" -o "$WORK/$side/$name" >"$WORK/$name.$side.log" 2>&1; then
            echo "$name: compile failed with the $side binary:"; head -5 "$WORK/$name.$side.log"; status=1
        fi
    done
done
if diff -r "$WORK/before" "$WORK/after"; then
    echo "${#inputs[@]} projects, identical"
else
    status=1
fi
exit $status
