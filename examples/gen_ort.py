#!/usr/bin/env python3
"""Generate ONNX Runtime training artifacts and ONNX Runtime's own training run.

Requirements (Python 3.11):  pip install numpy onnx onnxruntime-training==1.19.2
Run from anywhere:            python3 examples/gen_ort.py

For each model in MODELS (mlp, cnn, vit, mlp variants, cnn_deep,
cnn_big, vit_big and mobilenet, whose training programs need more than 2 MB
live, and mlp_wide, a 1000-class head) this script

1. builds the forward ONNX model with onnx.helper, initial weights as
   initializers drawn from a fixed seed;
2. calls onnxruntime.training.artifacts.generate_artifacts with SGD (AdamW
   for mlp_adamw) and a loss, which writes training_model.onnx, eval_model.onnx,
   optimizer_model.onnx and checkpoint;
3. trains with ONNX Runtime's C++ training API (CheckpointState, Module,
   Optimizer) for N_BATCHES mini-batches, accumulating gradients over
   N_ACCUM (BATCHING overrides both per model; opt.step() then
   module.lazy_reset_grad() after every N_ACCUM
   mini-batches: ORT's lazy_reset_grad makes the *next* training step
   overwrite the gradient accumulators instead of adding to them);
4. writes into examples/ort/<m>/ the three ONNX artifacts, unmodified, and
     data.npz       initial parameters by name, mini-batch inputs
                    `mb<k>_<input name>`, meta_n_batches, meta_n_accum,
                    learning_rate
     reference.npz  `loss` per mini-batch and the final parameters by
                    name (trainable and frozen: BatchNorm's running
                    statistics), as ONNX Runtime computed them.
   The checkpoint is not kept: strata takes the initial parameters from
   data.npz (they equal the checkpoint's, which the script checks).

The output is deterministic (fixed seeds; np.savez with fixed timestamps).
ORT's artifact builder numbers the node names it makes with one counter per
process, so the checked-in files are those of one run over all models in
order (`python3 examples/gen_ort.py`); a single model alone gets other
names, the same numbers.
onnxruntime-training needs torch only for imports this script does not use:
a stub module stands in for it.
"""

# onnxruntime.training imports torch at module level; nothing here uses it.
import sys, unittest.mock as um, importlib.machinery  # noqa: E401,E402

_t = um.MagicMock()
_t.__spec__ = importlib.machinery.ModuleSpec("torch", None)
sys.modules["torch"] = _t
sys.modules["torch.nn"] = _t.nn
sys.modules["torch.onnx"] = _t.onnx

import functools  # noqa: E402
import io  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.training import artifacts  # noqa: E402
from onnxruntime.training.api import CheckpointState, Module, Optimizer  # noqa: E402

# onnxruntime-training 1.19.2 reads ONNX IR <= 10 and opsets <= 21. Its
# artifact builder stamps the optimizer model with the *installed* onnx's
# IR_VERSION and default opset; with onnx newer than 1.16 ORT then refuses to
# load it. Pin both to what onnx 1.16 (ORT 1.19's own) would write, so the
# artifacts are the ones ORT 1.19 itself produces and loads.
if onnx.IR_VERSION > 10:
    onnx.IR_VERSION = 10
if onnx.defs.onnx_opset_version() > 21:
    onnx.defs.onnx_opset_version = lambda: 21

OUT = Path(__file__).resolve().parent / "ort"
N_BATCHES = 6
N_ACCUM = 2
LR = 0.05
OPSET = 17


def init(rng, shape, fan_in):
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def add_conv_bn_relu(rng, p, frozen, nodes, x, i, cin, cout, k, stride, group):
    """Conv (weights from `rng` into `p`), training-mode BatchNormalization
    (running statistics into `frozen`) and Relu on `x`, appended to `nodes`;
    returns the Relu's output name."""
    p[f"conv{i}.weight"] = init(rng, (cout, cin // group, k, k), (cin // group) * k * k)
    p[f"bn{i}.weight"] = (1.0 + 0.1 * rng.standard_normal(cout)).astype(np.float32)
    p[f"bn{i}.bias"] = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    frozen[f"bn{i}.running_mean"] = np.zeros(cout, np.float32)
    frozen[f"bn{i}.running_var"] = np.ones(cout, np.float32)
    pad = k // 2
    nodes.extend(
        [
            helper.make_node(
                "Conv",
                [x, f"conv{i}.weight"],
                [f"c{i}"],
                kernel_shape=[k, k],
                pads=[pad] * 4,
                strides=[stride, stride],
                group=group,
            ),
            helper.make_node(
                "BatchNormalization",
                [f"c{i}", f"bn{i}.weight", f"bn{i}.bias", f"bn{i}.running_mean", f"bn{i}.running_var"],
                [f"b{i}", f"bn{i}.running_mean_out", f"bn{i}.running_var_out"],
                epsilon=1e-5,
                momentum=0.9,
                training_mode=1,
            ),
            helper.make_node("Relu", [f"b{i}"], [f"r{i}"]),
        ]
    )
    return f"r{i}"


def make_model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    m = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        producer_name="strata gen_ort.py",
    )
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


# --------------------------------------------------------------------------
# Models: (forward model, trainable, frozen, loss, batch maker)
# --------------------------------------------------------------------------


def teacher_batches(rng, B, F, C):
    """Draws a random linear teacher; batches of (x, argmax class of x @ teacher)."""
    teacher = rng.standard_normal((F, C))

    def batch(rng):
        x = rng.standard_normal((B, F)).astype(np.float32)
        y = np.argmax(x.astype(np.float64) @ teacher, axis=1).astype(np.int64)
        return {"input": x, "labels": y}

    return batch


def mlp_of(name, B, F, H, C):
    """An MLP classifier builder: Gemm H + Relu -> Gemm C at batch B on F features."""

    def build(rng):
        p = {
            "fc1.weight": init(rng, (H, F), F),
            "fc1.bias": init(rng, (H,), F),
            "fc2.weight": init(rng, (C, H), H),
            "fc2.bias": init(rng, (C,), H),
        }
        nodes = [
            helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h1"], transB=1),
            helper.make_node("Relu", ["h1"], ["r1"]),
            helper.make_node("Gemm", ["r1", "fc2.weight", "fc2.bias"], ["output"], transB=1),
        ]
        m = make_model(name, nodes, [("input", [B, F])], [("output", [B, C])], p)
        return m, list(p), [], artifacts.LossType.CrossEntropyLoss, teacher_batches(rng, B, F, C)

    return build


mlp = mlp_of("mlp", 4, 12, 16, 6)
# mlp with a 1000-class head at batch 32: the loss and its gradient each
# hold 32 x 1000 scores (128,000 bytes) and log-probabilities, more than
# strata's default L1 holds at once, so they are tiled by rows.
mlp_wide = mlp_of("mlp_wide", 32, 24, 32, 1000)


def cnn(rng):
    """A MobileNet-like block: Conv 3x3/2 -> BN -> Relu -> dw 3x3 -> Relu -> pw 1x1 -> GAP -> Gemm."""
    B, Cin, HW, C1, C2, K = 2, 3, 8, 4, 6, 5
    p = {
        "conv1.weight": init(rng, (C1, Cin, 3, 3), Cin * 9),
        "bn1.weight": (1.0 + 0.1 * rng.standard_normal(C1)).astype(np.float32),
        "bn1.bias": (0.1 * rng.standard_normal(C1)).astype(np.float32),
        "dw.weight": init(rng, (C1, 1, 3, 3), 9),
        "dw.bias": init(rng, (C1,), 9),
        "pw.weight": init(rng, (C2, C1, 1, 1), C1),
        "pw.bias": init(rng, (C2,), C1),
        "fc.weight": init(rng, (K, C2), C2),
        "fc.bias": init(rng, (K,), C2),
    }
    frozen = {
        "bn1.running_mean": np.zeros(C1, np.float32),
        "bn1.running_var": np.ones(C1, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node(
            "BatchNormalization",
            ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
            ["b1", "bn1.running_mean_out", "bn1.running_var_out"],
            epsilon=1e-5,
            momentum=0.9,
            training_mode=1,
        ),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw.weight", "dw.bias"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=C1),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "pw.weight", "pw.bias"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], transB=1),
    ]
    m = make_model("cnn", nodes, [("input", [B, Cin, HW, HW])], [("output", [B, K])], {**p, **frozen})

    def batch(rng):
        x = rng.standard_normal((B, Cin, HW, HW)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), list(frozen), artifacts.LossType.CrossEntropyLoss, batch


def cnn_deep(rng):
    """A deep plain CNN with batch-1 BatchNorm: 11 x (Conv 3x3 -> BN -> Relu),
    strides 2 at layers 4 and 8 (16x16 -> 4x4), then GAP -> Gemm. With one
    sample per batch the BN statistics are over the spatial positions only,
    and float32 rounding decides the sign of ReLU inputs near zero in any
    engine: the f64 oracle says which engine is closer to the exact result."""
    B, Cin, HW, C, K, L = 1, 3, 16, 8, 5, 11
    p, frozen, nodes = {}, {}, []
    x = "input"
    for i in range(L):
        cin = Cin if i == 0 else C
        s = 2 if i in (4, 8) else 1
        p[f"conv{i}.weight"] = init(rng, (C, cin, 3, 3), cin * 9)
        p[f"bn{i}.weight"] = (1.0 + 0.1 * rng.standard_normal(C)).astype(np.float32)
        p[f"bn{i}.bias"] = (0.1 * rng.standard_normal(C)).astype(np.float32)
        frozen[f"bn{i}.running_mean"] = np.zeros(C, np.float32)
        frozen[f"bn{i}.running_var"] = np.ones(C, np.float32)
        nodes += [
            helper.make_node("Conv", [x, f"conv{i}.weight"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[s, s]),
            helper.make_node(
                "BatchNormalization",
                [f"c{i}", f"bn{i}.weight", f"bn{i}.bias", f"bn{i}.running_mean", f"bn{i}.running_var"],
                [f"b{i}", f"bn{i}.running_mean_out", f"bn{i}.running_var_out"],
                epsilon=1e-5,
                momentum=0.9,
                training_mode=1,
            ),
            helper.make_node("Relu", [f"b{i}"], [f"r{i}"]),
        ]
        x = f"r{i}"
    p["fc.weight"] = init(rng, (K, C), C)
    p["fc.bias"] = init(rng, (K,), C)
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], transB=1),
    ]
    m = make_model("cnn_deep", nodes, [("input", [B, Cin, HW, HW])], [("output", [B, K])], {**p, **frozen})

    def batch(rng):
        x = rng.standard_normal((B, Cin, HW, HW)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), list(frozen), artifacts.LossType.CrossEntropyLoss, batch


def vit(rng):
    """A tiny CCT-like transformer block on tokens [B, T, D]."""
    B, T, D, Hd, K = 2, 4, 8, 16, 3
    p = {
        "ln1.weight": (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32),
        "ln1.bias": (0.1 * rng.standard_normal(D)).astype(np.float32),
        "q.weight": init(rng, (D, D), D),
        "k.weight": init(rng, (D, D), D),
        "v.weight": init(rng, (D, D), D),
        "ln2.weight": (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32),
        "ln2.bias": (0.1 * rng.standard_normal(D)).astype(np.float32),
        "mlp1.weight": init(rng, (D, Hd), D),
        "mlp2.weight": init(rng, (Hd, D), Hd),
        "head.weight": init(rng, (K, D), D),
        "head.bias": init(rng, (K,), D),
    }
    consts = {
        "scale": np.array(np.sqrt(D), np.float32),
    }
    mk = helper.make_node
    nodes = [
        mk("LayerNormalization", ["input", "ln1.weight", "ln1.bias"], ["n1", "n1.mean", "n1.inv_std"], axis=-1, epsilon=1e-5),
        mk("MatMul", ["n1", "q.weight"], ["q"]),
        mk("MatMul", ["n1", "k.weight"], ["k"]),
        mk("MatMul", ["n1", "v.weight"], ["v"]),
        mk("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        mk("MatMul", ["q", "kt"], ["s"]),
        mk("Div", ["s", "scale"], ["s_scaled"]),
        mk("Softmax", ["s_scaled"], ["a"], axis=-1),
        mk("MatMul", ["a", "v"], ["att"]),
        mk("Add", ["input", "att"], ["x1"]),
        mk("LayerNormalization", ["x1", "ln2.weight", "ln2.bias"], ["n2", "n2.mean", "n2.inv_std"], axis=-1, epsilon=1e-5),
        mk("MatMul", ["n2", "mlp1.weight"], ["m1"]),
        mk("Gelu", ["m1"], ["g1"], domain="com.microsoft"),
        mk("MatMul", ["g1", "mlp2.weight"], ["m2"]),
        mk("Add", ["x1", "m2"], ["x2"]),
        mk("ReduceMean", ["x2"], ["pooled"], axes=[1], keepdims=0),
        mk("Gemm", ["pooled", "head.weight", "head.bias"], ["output"], transB=1),
    ]
    m = make_model("vit", nodes, [("input", [B, T, D])], [("output", [B, K])], {**p, **consts})

    def batch(rng):
        x = rng.standard_normal((B, T, D)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), [], artifacts.LossType.CrossEntropyLoss, batch


def mlp_loss(loss):
    """mlp under another of ORT's losses, with a float target of the output's
    shape: a regression target for MSELoss and L1Loss, 0/1 labels for
    BCEWithLogitsLoss (ORT builds these losses from plain ONNX ops)."""

    def build(rng):
        m, trainable, frozen, _, batch = mlp(rng)

        def batch_t(rng):
            x = batch(rng)["input"]
            if loss == "BCEWithLogitsLoss":
                t = (x[:, :6] > 0).astype(np.float32)
            else:
                t = (0.5 * x[:, :6] + 0.1 * rng.standard_normal((4, 6))).astype(np.float32)
            return {"input": x, "target": t}

        return m, trainable, frozen, getattr(artifacts.LossType, loss), batch_t

    return build


def mlp_acts(rng):
    """Three hidden layers with Tanh, Sigmoid and LeakyRelu: ORT's backward
    uses TanhGrad, SigmoidGrad and LeakyReluGrad from the forward outputs."""
    B, F, H, C = 4, 12, 16, 6
    p = {}
    dims = [F, H, H, H, C]
    for k in range(4):
        p[f"fc{k + 1}.weight"] = init(rng, (dims[k + 1], dims[k]), dims[k])
        p[f"fc{k + 1}.bias"] = init(rng, (dims[k + 1],), dims[k])
    acts = [("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {"alpha": 0.1})]
    nodes, x = [], "input"
    for k in range(4):
        y = "output" if k == 3 else f"h{k + 1}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{k + 1}.weight", f"fc{k + 1}.bias"], [y], transB=1))
        if k < 3:
            op, attrs = acts[k]
            nodes.append(helper.make_node(op, [y], [f"a{k + 1}"], **attrs))
            x = f"a{k + 1}"
    m = make_model("mlp_acts", nodes, [("input", [B, F])], [("output", [B, C])], p)
    return m, list(p), [], artifacts.LossType.CrossEntropyLoss, teacher_batches(rng, B, F, C)


def cnn_big(rng):
    """A MobileNetV1-like CNN whose training program needs well over 2 MB
    live: Conv 3x3 (3 -> 16) -> BN -> Relu at 64x64, then three depthwise
    separable blocks, each dw Conv 3x3 -> BN -> Relu -> pw Conv 1x1 -> BN ->
    Relu (the second and third dw with stride 2, 64x64 -> 32x32 -> 16x16),
    GAP -> Gemm. Few parameters (about 4,400), large activations (batch 2 x
    64 x 64). The last block brings GAP's input to 16x16: ORT's GAP gradient
    is an Expand to that shape, which strata runs as one tile in L1."""
    B, Cin, HW, C1, C2, C3, K = 2, 3, 64, 16, 32, 32, 10
    p, frozen, nodes = {}, {}, []

    conv_bn_relu = functools.partial(add_conv_bn_relu, rng, p, frozen, nodes)

    x = conv_bn_relu("input", 0, Cin, C1, 3, 1, 1)
    x = conv_bn_relu(x, 1, C1, C1, 3, 1, C1)  # depthwise
    x = conv_bn_relu(x, 2, C1, C2, 1, 1, 1)  # pointwise
    x = conv_bn_relu(x, 3, C2, C2, 3, 2, C2)  # depthwise, stride 2
    x = conv_bn_relu(x, 4, C2, C3, 1, 1, 1)  # pointwise
    x = conv_bn_relu(x, 5, C3, C3, 3, 2, C3)  # depthwise, stride 2
    x = conv_bn_relu(x, 6, C3, C3, 1, 1, 1)  # pointwise
    p["fc.weight"] = init(rng, (K, C3), C3)
    p["fc.bias"] = init(rng, (K,), C3)
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], transB=1),
    ]
    m = make_model("cnn_big", nodes, [("input", [B, Cin, HW, HW])], [("output", [B, K])], {**p, **frozen})

    def batch(rng):
        x = rng.standard_normal((B, Cin, HW, HW)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), list(frozen), artifacts.LossType.CrossEntropyLoss, batch


def vit_big(rng):
    """A small CCT-like transformer whose training program needs well over
    2 MB live: a conv tokenizer (Conv 3x3 stride 2, 3 -> D, -> Relu, 32x32
    -> 16x16, so T = 256 tokens; a stride-2 conv rather than CCT's MaxPool,
    which strata runs as one tile in L1), a learned positional embedding,
    one pre-norm block with 2-head attention (Reshape/Transpose into heads,
    scores [B, H, T, T]) and a Gelu MLP, mean pooling over tokens, Gemm."""
    B, Cin, HW, D, H, Hd, K = 1, 3, 32, 32, 4, 64, 10
    T, dh = (HW // 2) ** 2, D // H
    p = {
        "tok.weight": init(rng, (D, Cin, 3, 3), Cin * 9),
        "tok.bias": init(rng, (D,), Cin * 9),
        "pos": (0.02 * rng.standard_normal((1, T, D))).astype(np.float32),
        "ln1.weight": (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32),
        "ln1.bias": (0.1 * rng.standard_normal(D)).astype(np.float32),
        "q.weight": init(rng, (D, D), D),
        "k.weight": init(rng, (D, D), D),
        "v.weight": init(rng, (D, D), D),
        "proj.weight": init(rng, (D, D), D),
        "ln2.weight": (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32),
        "ln2.bias": (0.1 * rng.standard_normal(D)).astype(np.float32),
        "mlp1.weight": init(rng, (D, Hd), D),
        "mlp2.weight": init(rng, (Hd, D), Hd),
        "head.weight": init(rng, (K, D), D),
        "head.bias": init(rng, (K,), D),
    }
    consts = {
        "scale": np.array(np.sqrt(dh), np.float32),
        "shape_tokens": np.array([B, D, T], np.int64),
        "shape_heads": np.array([B, T, H, dh], np.int64),
        "shape_merge": np.array([B, T, D], np.int64),
    }
    mk = helper.make_node
    nodes = [
        mk("Conv", ["input", "tok.weight", "tok.bias"], ["tc"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        mk("Relu", ["tc"], ["tr"]),
        mk("Reshape", ["tr", "shape_tokens"], ["tf"]),
        mk("Transpose", ["tf"], ["tokens"], perm=[0, 2, 1]),
        mk("Add", ["tokens", "pos"], ["x0"]),
        mk("LayerNormalization", ["x0", "ln1.weight", "ln1.bias"], ["n1", "n1.mean", "n1.inv_std"], axis=-1, epsilon=1e-5),
    ]
    for t in ("q", "k", "v"):
        nodes += [
            mk("MatMul", ["n1", f"{t}.weight"], [f"{t}0"]),
            mk("Reshape", [f"{t}0", "shape_heads"], [f"{t}1"]),
            mk("Transpose", [f"{t}1"], [f"{t}h"], perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        mk("MatMul", ["qh", "kh"], ["s"]),
        mk("Div", ["s", "scale"], ["s_scaled"]),
        mk("Softmax", ["s_scaled"], ["a"], axis=-1),
        mk("MatMul", ["a", "vh"], ["o"]),
        mk("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        mk("Reshape", ["ot", "shape_merge"], ["om"]),
        mk("MatMul", ["om", "proj.weight"], ["att"]),
        mk("Add", ["x0", "att"], ["x1"]),
        mk("LayerNormalization", ["x1", "ln2.weight", "ln2.bias"], ["n2", "n2.mean", "n2.inv_std"], axis=-1, epsilon=1e-5),
        mk("MatMul", ["n2", "mlp1.weight"], ["m1"]),
        mk("Gelu", ["m1"], ["g1"], domain="com.microsoft"),
        mk("MatMul", ["g1", "mlp2.weight"], ["m2"]),
        mk("Add", ["x1", "m2"], ["x2"]),
        mk("ReduceMean", ["x2"], ["pooled"], axes=[1], keepdims=0),
        mk("Gemm", ["pooled", "head.weight", "head.bias"], ["output"], transB=1),
    ]
    m = make_model("vit_big", nodes, [("input", [B, Cin, HW, HW])], [("output", [B, K])], {**p, **consts})

    def batch(rng):
        x = rng.standard_normal((B, Cin, HW, HW)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), [], artifacts.LossType.CrossEntropyLoss, batch


# MobileNetV1's depthwise-separable blocks: (depthwise stride, output channels
# at width 1.0), Howard et al. 2017, table 1.
MOBILENET_V1_BLOCKS = [
    (1, 64),
    (2, 128),
    (1, 128),
    (2, 256),
    (1, 256),
    (2, 512),
    (1, 512),
    (1, 512),
    (1, 512),
    (1, 512),
    (1, 512),
    (2, 1024),
    (1, 1024),
]


def mobilenet(rng):
    """The full MobileNetV1 topology at width multiplier 0.25 on 112x112
    inputs, batch 2: Conv 3x3 stride 2 (3 -> 8) -> BN -> Relu, then the 13
    depthwise-separable blocks (dw Conv 3x3 -> BN -> Relu -> pw Conv 1x1 ->
    BN -> Relu; dw stride 2 at blocks 2, 4, 6 and 12; channels 16, 32, 32,
    64, 64, 128, 5 x 128, 256, 256), GAP -> Gemm to 10 classes; 112x112 ->
    56x56 -> 28x28 -> 14x14 -> 7x7 -> 4x4. Sized for strata's L1 tiles at
    128,000 bytes: the stem's weight gradient needs one input channel of
    the batch (2 x 112 x 112) and one output channel in one tile, BatchNorm
    one channel (at most 2 x 56 x 56), and ORT's GAP gradient Expands to the
    last feature map (2 x 256 x 4 x 4)."""
    B, Cin, HW, alpha, K = 2, 3, 112, 0.25, 10
    p, frozen, nodes = {}, {}, []

    conv_bn_relu = functools.partial(add_conv_bn_relu, rng, p, frozen, nodes)

    c = int(32 * alpha)
    x = conv_bn_relu("input", 0, Cin, c, 3, 2, 1)
    for j, (stride, width) in enumerate(MOBILENET_V1_BLOCKS):
        cout = int(width * alpha)
        x = conv_bn_relu(x, 2 * j + 1, c, c, 3, stride, c)  # depthwise
        x = conv_bn_relu(x, 2 * j + 2, c, cout, 1, 1, 1)  # pointwise
        c = cout
    p["fc.weight"] = init(rng, (K, c), c)
    p["fc.bias"] = init(rng, (K,), c)
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["output"], transB=1),
    ]
    m = make_model("mobilenet", nodes, [("input", [B, Cin, HW, HW])], [("output", [B, K])], {**p, **frozen})

    def batch(rng):
        x = rng.standard_normal((B, Cin, HW, HW)).astype(np.float32)
        y = rng.integers(0, K, B).astype(np.int64)
        return {"input": x, "labels": y}

    return m, list(p), list(frozen), artifacts.LossType.CrossEntropyLoss, batch


# name: (builder, seed, optimizer). mlp_adamw is mlp under ORT's AdamW
# (AdamWOptimizer over sequences, moments as optimizer state); mlp_mse,
# mlp_l1 and mlp_bce are mlp under ORT's other losses; mlp_acts has Tanh,
# Sigmoid and LeakyRelu layers. mobilenet's seed is 14, not 12: its gradients
# are ill-conditioned under some draws (at batch 2 the last blocks'
# BatchNorms see 32 values per channel). Under seeds 12 and 13 ONNX Runtime
# and strata end ~1e-2 from strata's f64 oracle and from each other, under
# 16 both ~9e-3 from the oracle but within 2e-5 of each other (seemingly a
# discrete float32 effect, e.g. a ReLU input within rounding of zero, not
# measured); under 14 and 15 all three agree within 2e-5. With the first
# 12 blocks only, seed 12 agrees within 2e-5 too.
MODELS = {
    "mlp": (mlp, 1, "SGD"),
    "cnn": (cnn, 2, "SGD"),
    "vit": (vit, 3, "SGD"),
    "mlp_adamw": (mlp, 4, "AdamW"),
    "mlp_mse": (mlp_loss("MSELoss"), 5, "SGD"),
    "mlp_l1": (mlp_loss("L1Loss"), 6, "SGD"),
    "mlp_bce": (mlp_loss("BCEWithLogitsLoss"), 7, "SGD"),
    "mlp_acts": (mlp_acts, 8, "SGD"),
    "cnn_deep": (cnn_deep, 9, "SGD"),
    "cnn_big": (cnn_big, 10, "SGD"),
    "vit_big": (vit_big, 11, "SGD"),
    "mobilenet": (mobilenet, 14, "SGD"),
    "mlp_wide": (mlp_wide, 15, "SGD"),
}
# (n_batches, n_accum) where not (N_BATCHES, N_ACCUM): the big models, whose
# training programs need more than 2 MB live, train on fewer mini-batches so
# their data.npz stays small and their tests fast.
BATCHING = {
    "cnn_big": (4, 2),
    "vit_big": (4, 2),
    "mobilenet": (2, 2),
    "mlp_wide": (4, 2),
}


# --------------------------------------------------------------------------


def savez(path: Path, arrays: dict):
    """np.savez with a fixed timestamp, so that the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[k]), allow_pickle=False)
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, buf.getvalue())


def generate(name: str):
    build, seed, optim = MODELS[name]
    rng = np.random.default_rng(20240700 + seed)
    model, trainable, frozen, loss, batch = build(rng)
    initial = {i.name: numpy_helper.to_array(i).copy() for i in model.graph.initializer}
    n_batches, n_accum = BATCHING.get(name, (N_BATCHES, N_ACCUM))
    batches = [batch(rng) for _ in range(n_batches)]

    out = OUT / name
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        art = Path(tmp) / "art"
        art.mkdir()
        artifacts.generate_artifacts(
            model,
            requires_grad=trainable,
            frozen_params=frozen,
            loss=loss,
            optimizer=getattr(artifacts.OptimType, optim),
            artifact_directory=str(art),
        )
        for f in ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx"):
            shutil.copyfile(art / f, out / f)

        state = CheckpointState.load_checkpoint(str(art / "checkpoint"))
        # No eval model: only training runs here, and ORT 1.19 cannot load its
        # own eval model of a training-mode BatchNormalization (it keeps the
        # three outputs while switching training_mode off).
        module = Module(str(art / "training_model.onnx"), state)
        opt = Optimizer(str(art / "optimizer_model.onnx"), module)
        opt.set_learning_rate(LR)
        params = trainable + frozen
        for k in params:
            np.testing.assert_array_equal(state.parameters[k].data, initial[k])
        feed_names = module.input_names()
        module.train()
        losses = []
        for b, mb in enumerate(batches):
            feeds = [mb[n] for n in feed_names]
            loss_v = module(*feeds)
            losses.append(np.float32(np.asarray(loss_v).reshape(-1)[0]))
            if (b + 1) % n_accum == 0:
                opt.step()
                module.lazy_reset_grad()
        # Frozen parameters are compared too: ORT's BatchNormInternal updates
        # the running statistics in the checkpoint's buffers every step (the
        # same in-place update strata performs).
        final = {k: np.array(state.parameters[k].data, dtype=np.float32) for k in params}

    data = {k: initial[k] for k in params}
    for b, mb in enumerate(batches):
        for k, v in mb.items():
            data[f"mb{b}_{k}"] = v
    data["meta_n_batches"] = np.array(n_batches, np.int64)
    data["meta_n_accum"] = np.array(n_accum, np.int64)
    data["learning_rate"] = np.array([LR], np.float32)
    savez(out / "data.npz", data)
    ref = {"loss": np.array(losses, np.float32), **final}
    savez(out / "reference.npz", ref)
    moved = max(float(np.abs(final[k] - initial[k]).max()) for k in trainable)
    print(f"{name}: inputs {feed_names}, losses {np.round(losses, 5).tolist()}, max weight change {moved:.4f}")


def main():
    names = sys.argv[1:] or list(MODELS)
    for n in names:
        generate(n)


if __name__ == "__main__":
    main()
