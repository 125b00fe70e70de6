#!/usr/bin/env python3
"""Generate strata's own example training program: a small MLP classifier.

Requirements (Python 3.11):  pip install numpy onnx
Run from anywhere:            python3 examples/gen_mlp.py

Writes, deterministically, a Deeploy/Onnx4Deeploy-layout training program
(see ../shared/docs/TRAINING_GRAPHS.md) into examples/mlp/:

    mlp_train/network.onnx      forward + backward + gradient accumulation
    mlp_train/inputs.npz        mini-batches, initial parameters, meta data
    mlp_train/outputs.npz       reference losses and trained parameters
    mlp_optimizer/network.onnx  one SGD node per parameter

The graph is written the way ONNX Runtime's generate_artifacts writes one
(Gemm/Relu forward, SoftmaxCrossEntropyLoss, com.microsoft gradient ops,
InPlaceAccumulatorV2), but by hand, so no onnxruntime-training is needed.
It deliberately covers spellings the Deeploy fixtures do not: batch size 4,
trainable biases, ReduceSum with `axes` as an input (opset 13+ form), and
SoftmaxCrossEntropyLossGrad in ORT's 3-input form (dY, log_prob, labels).

The reference in outputs.npz is computed independently with numpy in float64
(forward, backward, accumulation, SGD), checked against finite differences,
and cast to float32 at the end.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240611
BATCH = 4
N_FEATURES = 16
HIDDEN = (32, 24)
N_CLASSES = 10
N_BATCHES = 6
N_ACCUM = 2
LR = 0.05

# (name, out_features, in_features) in forward order.
LAYERS = [
    ("fc1", HIDDEN[0], N_FEATURES),
    ("fc2", HIDDEN[1], HIDDEN[0]),
    ("fc3", N_CLASSES, HIDDEN[1]),
]


def param_names() -> list[str]:
    names = []
    for layer, _, _ in LAYERS:
        names += [f"{layer}_weight", f"{layer}_bias"]
    return names


# --------------------------------------------------------------------------
# Data and initial parameters
# --------------------------------------------------------------------------


def make_data(rng: np.random.Generator):
    """Initial parameters (PyTorch-style uniform init) and N_BATCHES mini-batches.

    Labels come from a fixed random linear "teacher" so that there is
    something to learn and the loss moves in a meaningful direction.
    """
    params: dict[str, np.ndarray] = {}
    for layer, n_out, n_in in LAYERS:
        bound = 1.0 / np.sqrt(n_in)
        params[f"{layer}_weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        params[f"{layer}_bias"] = rng.uniform(-bound, bound, (n_out,)).astype(np.float32)
    teacher = rng.standard_normal((N_FEATURES, N_CLASSES))
    batches = []
    for _ in range(N_BATCHES):
        x = rng.standard_normal((BATCH, N_FEATURES)).astype(np.float32)
        y = np.argmax(x.astype(np.float64) @ teacher, axis=1).astype(np.int64)
        batches.append((x, y))
    return params, batches


# --------------------------------------------------------------------------
# Reference: numpy, float64, written independently of the ONNX graph
# --------------------------------------------------------------------------


def forward(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray):
    """Returns (loss, cache) for mean softmax cross-entropy."""
    acts = [x]
    h = x
    for i, (layer, _, _) in enumerate(LAYERS):
        z = h @ p[f"{layer}_weight"].T + p[f"{layer}_bias"]
        h = np.maximum(z, 0.0) if i + 1 < len(LAYERS) else z
        acts.append(h)
    logits = acts[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_prob[np.arange(len(y)), y].mean()
    return loss, (acts, log_prob)


def backward(p: dict[str, np.ndarray], y: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Gradients of the mean loss with respect to every parameter."""
    acts, log_prob = cache
    b = len(y)
    d = np.exp(log_prob)
    d[np.arange(b), y] -= 1.0
    d /= b  # d(loss)/d(logits) for reduction = mean
    grads = {}
    for i in reversed(range(len(LAYERS))):
        layer = LAYERS[i][0]
        h_in = acts[i]
        grads[f"{layer}_weight"] = d.T @ h_in
        grads[f"{layer}_bias"] = d.sum(axis=0)
        if i > 0:
            # h_in = relu(z); relu'(z) = [h_in > 0]
            d = (d @ p[f"{layer}_weight"]) * (h_in > 0)
    return grads


def finite_difference_check(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Central differences on every parameter entry; returns the worst
    relative error ||num - ana|| / ||num + ana|| over the parameters."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    x = x.astype(np.float64)
    _, cache = forward(p, x, y)
    analytic = backward(p, y, cache)
    eps = 1e-6
    worst = 0.0
    for name in param_names():
        numeric = np.zeros_like(p[name])
        flat = p[name].reshape(-1)  # a view: edits reach p[name]
        num_flat = numeric.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            plus, _ = forward(p, x, y)
            flat[j] = saved - eps
            minus, _ = forward(p, x, y)
            flat[j] = saved
            num_flat[j] = (plus - minus) / (2 * eps)
        denom = np.linalg.norm(numeric + analytic[name])
        err = np.linalg.norm(numeric - analytic[name]) / max(denom, 1e-30)
        worst = max(worst, err)
    return worst


def train_reference(params: dict[str, np.ndarray], batches):
    """The loop the fixtures encode: accumulate N_ACCUM mini-batches
    (the first overwrites the accumulator), then one SGD step."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    acc = {k: np.zeros_like(v) for k, v in p.items()}
    losses = []
    k = 0
    for _update in range(N_BATCHES // N_ACCUM):
        for a in range(N_ACCUM):
            lazy_reset_grad = a == 0
            x, y = batches[k]
            k += 1
            loss, cache = forward(p, x.astype(np.float64), y)
            grads = backward(p, y, cache)
            for name in acc:
                acc[name] = grads[name].copy() if lazy_reset_grad else acc[name] + grads[name]
            losses.append(loss)
        for name in p:
            p[name] = p[name] - LR * acc[name]
    trained = {k: v.astype(np.float32) for k, v in p.items()}
    return np.array(losses, dtype=np.float32), trained


# --------------------------------------------------------------------------
# ONNX graphs
# --------------------------------------------------------------------------


def tensor_info(name: str, elem_type: int, shape: list[int]):
    return helper.make_tensor_value_info(name, elem_type, shape)


def build_train_graph(params: dict[str, np.ndarray]) -> onnx.ModelProto:
    names = param_names()
    ms = "com.microsoft"
    nodes = []

    # Forward: Gemm(transB=1) + Relu, last layer without Relu.
    h = "input"
    relu_outs = []  # the input of each layer after the first
    for i, (layer, _, _) in enumerate(LAYERS):
        last = i + 1 == len(LAYERS)
        z = "logits" if last else f"{layer}_out"
        nodes.append(
            helper.make_node(
                "Gemm",
                [h, f"{layer}_weight", f"{layer}_bias"],
                [z],
                name=f"{layer}_Gemm",
                alpha=1.0,
                beta=1.0,
                transA=0,
                transB=1,
            )
        )
        if not last:
            h = f"{layer}_relu_out"
            nodes.append(helper.make_node("Relu", [z], [h], name=f"{layer}_Relu"))
            relu_outs.append(h)

    nodes.append(
        helper.make_node(
            "SoftmaxCrossEntropyLoss",
            ["logits", "labels"],
            ["loss", "log_prob"],
            name="loss_SoftmaxCrossEntropyLoss",
            reduction="mean",
        )
    )

    # Backward, in ORT's spelling. dY of the loss is the initializer
    # `loss_grad` (1.0), fed to the 3-input form of the grad op.
    nodes.append(
        helper.make_node(
            "SoftmaxCrossEntropyLossGrad",
            ["loss_grad", "log_prob", "labels"],
            ["logits_grad"],
            name="loss_SoftmaxCrossEntropyLossGrad",
            domain=ms,
            reduction="mean",
        )
    )
    grad_of = {}
    dz = "logits_grad"
    for i in reversed(range(len(LAYERS))):
        layer = LAYERS[i][0]
        h_in = "input" if i == 0 else relu_outs[i - 1]
        nodes.append(
            helper.make_node(
                "ReduceSum",
                [dz, "axes"],
                [f"{layer}_bias_grad"],
                name=f"{layer}_Gemm_Grad_ReduceSum",
                keepdims=0,
                noop_with_empty_axes=0,
            )
        )
        nodes.append(
            helper.make_node(
                "Gemm",
                [dz, h_in],
                [f"{layer}_weight_grad"],
                name=f"{layer}_Gemm_Grad_dW",
                alpha=1.0,
                beta=0.0,
                transA=1,
                transB=0,
            )
        )
        grad_of[f"{layer}_weight"] = f"{layer}_weight_grad"
        grad_of[f"{layer}_bias"] = f"{layer}_bias_grad"
        if i > 0:
            dh = f"{h_in}_grad"
            nodes.append(
                helper.make_node(
                    "Gemm",
                    [dz, f"{layer}_weight"],
                    [dh],
                    name=f"{layer}_Gemm_Grad_dX",
                    alpha=1.0,
                    beta=0.0,
                    transA=0,
                    transB=0,
                )
            )
            # Like ORT's gradient builder, ReluGrad gets the Relu *output*;
            # output > 0 exactly where input > 0.
            prev = LAYERS[i - 1][0]
            dz = f"{prev}_out_grad"
            nodes.append(
                helper.make_node("ReluGrad", [dh, h_in], [dz], name=f"{prev}_ReluGrad", domain=ms)
            )

    for name in names:
        nodes.append(
            helper.make_node(
                "InPlaceAccumulatorV2",
                [f"{name}_grad.accumulation.buffer", grad_of[name], "lazy_reset_grad"],
                [f"{name}_grad.accumulation.out"],
                name=f"{name}_InPlaceAccumulatorV2",
                domain=ms,
            )
        )

    inputs = [
        tensor_info("input", TensorProto.FLOAT, [BATCH, N_FEATURES]),
        tensor_info("labels", TensorProto.INT64, [BATCH]),
    ]
    inputs += [tensor_info(n, TensorProto.FLOAT, list(params[n].shape)) for n in names]
    inputs += [
        tensor_info(f"{n}_grad.accumulation.buffer", TensorProto.FLOAT, list(params[n].shape))
        for n in names
    ]
    inputs.append(tensor_info("lazy_reset_grad", TensorProto.BOOL, [1]))

    # InPlaceAccumulatorV2's first output is, in ORT's schema, the BOOL[1]
    # "updated" flag; as in the fixtures, consumers treat it as the
    # accumulator itself, updated in place.
    outputs = [tensor_info("loss", TensorProto.FLOAT, [])]
    outputs += [
        tensor_info(f"{n}_grad.accumulation.out", TensorProto.BOOL, [1]) for n in names
    ]

    initializers = [
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "loss_grad"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
    ]
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)],
        producer_name="strata examples/gen_mlp.py",
    )
    model.ir_version = 8
    return model


def build_optimizer_graph(params: dict[str, np.ndarray]) -> onnx.ModelProto:
    nodes, inputs, outputs = [], [], []
    for name in param_names():
        shape = list(params[name].shape)
        buf = f"{name}_grad.accumulation.buffer"
        inputs += [tensor_info(name, TensorProto.FLOAT, shape), tensor_info(buf, TensorProto.FLOAT, shape)]
        outputs.append(tensor_info(f"{name}_updated", TensorProto.FLOAT, shape))
        nodes.append(
            helper.make_node("SGD", [name, buf], [f"{name}_updated"], name=f"{name}_SGD", lr=LR)
        )
    graph = helper.make_graph(nodes, "optimizer", inputs, outputs)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="strata examples/gen_mlp.py"
    )
    model.ir_version = 8
    return model


def check(model: onnx.ModelProto, what: str) -> None:
    """Runs the ONNX checker (with shape inference).

    The checker knows no `com.microsoft` schemas and skips those nodes; the
    default-domain `SGD` of Onnx4Deeploy's optimizer graph is not an ONNX op,
    so the checker would reject it: we check a copy where those nodes are
    moved to an unregistered domain, so everything else is still verified.
    """
    probe = copy.deepcopy(model)
    custom = "strata.check"
    moved = False
    for node in probe.graph.node:
        if node.domain == "" and node.op_type == "SGD":
            node.domain = custom
            moved = True
    if moved:
        probe.opset_import.append(helper.make_opsetid(custom, 1))
    onnx.checker.check_model(probe, full_check=True)
    print(f"checked {what}" + (" (SGD nodes skipped)" if moved else " (com.microsoft nodes skipped)"))


# --------------------------------------------------------------------------
# Self-check: run the written graphs node by node (float32) and compare
# --------------------------------------------------------------------------


def run_graph(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A tiny evaluator for exactly the ops these two graphs use, following
    the ONNX / com.microsoft semantics in TRAINING_GRAPHS.md. It catches
    wiring mistakes (a wrong operand, a wrong trans flag) that the reference,
    which never looks at the graph, cannot."""
    env = dict(feeds)
    for init in model.graph.initializer:
        env[init.name] = numpy_helper.to_array(init)
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ins = [env[n] for n in node.input]
        op = (node.domain, node.op_type)
        if op == ("", "Gemm"):
            a = ins[0].T if attrs.get("transA", 0) else ins[0]
            b = ins[1].T if attrs.get("transB", 0) else ins[1]
            y = attrs.get("alpha", 1.0) * (a @ b)
            if len(ins) > 2:
                y = y + attrs.get("beta", 1.0) * ins[2]
            outs = [y.astype(np.float32)]
        elif op == ("", "Relu"):
            outs = [np.maximum(ins[0], 0).astype(np.float32)]
        elif op == ("", "SoftmaxCrossEntropyLoss"):
            assert attrs["reduction"] == b"mean"
            x, y = ins
            lp = x - x.max(axis=1, keepdims=True)
            lp = lp - np.log(np.exp(lp).sum(axis=1, keepdims=True))
            outs = [np.float32(-lp[np.arange(len(y)), y].mean()), lp.astype(np.float32)]
        elif op == ("com.microsoft", "SoftmaxCrossEntropyLossGrad"):
            dy, lp, y = ins
            d = np.exp(lp)
            d[np.arange(len(y)), y] -= 1
            outs = [(d * dy / len(y)).astype(np.float32)]
        elif op == ("", "ReduceSum"):
            outs = [ins[0].sum(axis=tuple(ins[1]), keepdims=bool(attrs["keepdims"]))]
        elif op == ("com.microsoft", "ReluGrad"):
            outs = [np.where(ins[1] > 0, ins[0], 0).astype(np.float32)]
        elif op == ("com.microsoft", "InPlaceAccumulatorV2"):
            buf, value, reset = ins
            buf[...] = value if reset[0] else buf + value  # in place, as on the device
            outs = [buf]
        elif op == ("", "SGD"):
            w, g = ins
            w[...] = w - np.float32(attrs["lr"]) * g  # in place
            outs = [w]
        else:
            raise NotImplementedError(op)
        for name, value in zip(node.output, outs):
            assert name not in env, f"{name} defined twice"
            env[name] = value
    return {o.name: env[o.name] for o in model.graph.output}


def run_program(train: onnx.ModelProto, opt: onnx.ModelProto, inputs: dict[str, np.ndarray]):
    """The fixture loop, driven only by inputs.npz and the two graphs."""
    names = param_names()
    first = [inputs[f"arr_{i:04d}"] for i in range(2 + len(names) + 1)]
    state = {n: first[2 + i].copy() for i, n in enumerate(names)}
    bufs = {f"{n}_grad.accumulation.buffer": np.zeros_like(state[n]) for n in names}
    n_batches = int(inputs["meta_n_batches"][0])
    n_accum = int(inputs["meta_n_accum"][0])
    losses = []
    k = 0
    for _update in range(n_batches // n_accum):
        for a in range(n_accum):
            key = "arr_" if k == 0 else f"mb{k}_arr_"
            feeds = {"input": inputs[key + "0000"], "labels": inputs[key + "0001"]}
            feeds.update(state)
            feeds.update(bufs)
            feeds["lazy_reset_grad"] = np.array([a == 0])
            losses.append(run_graph(train, feeds)["loss"])
            k += 1
        run_graph(opt, {**state, **bufs})
    return np.array(losses, dtype=np.float32), state


# --------------------------------------------------------------------------


def main() -> None:
    root = Path(__file__).resolve().parent / "mlp"
    train_dir = root / "mlp_train"
    opt_dir = root / "mlp_optimizer"
    train_dir.mkdir(parents=True, exist_ok=True)
    opt_dir.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(SEED)
    params, batches = make_data(rng)

    err = finite_difference_check(params, *batches[0])
    assert err < 1e-4, f"backward disagrees with finite differences: {err:.3e}"
    print(f"finite-difference check: worst relative error {err:.2e}")

    losses, trained = train_reference(params, batches)

    train = build_train_graph(params)
    opt = build_optimizer_graph(params)
    check(train, "mlp_train/network.onnx")
    check(opt, "mlp_optimizer/network.onnx")
    onnx.save(train, train_dir / "network.onnx")
    onnx.save(opt, opt_dir / "network.onnx")

    # Graph inputs in graph order, without the accumulation buffers.
    x0, y0 = batches[0]
    first = [x0, y0] + [params[n] for n in param_names()] + [np.array([True])]
    inputs = {f"arr_{i:04d}": a for i, a in enumerate(first)}
    for k in range(1, N_BATCHES):
        inputs[f"mb{k}_arr_0000"] = batches[k][0]
        inputs[f"mb{k}_arr_0001"] = batches[k][1]
    inputs["meta_n_batches"] = np.array([N_BATCHES], dtype=np.int32)
    inputs["meta_data_size"] = np.array([N_BATCHES * BATCH], dtype=np.int32)
    inputs["meta_n_accum"] = np.array([N_ACCUM], dtype=np.int32)
    np.savez(train_dir / "inputs.npz", **inputs)

    # The written graphs, run in float32, must reproduce the float64 reference.
    graph_losses, graph_params = run_program(train, opt, inputs)
    np.testing.assert_allclose(graph_losses, losses, rtol=1e-5)
    for n in param_names():
        np.testing.assert_allclose(graph_params[n], trained[n], rtol=1e-4, atol=1e-6)
    print("graphs reproduce the reference (float32 evaluator)")

    outputs = {n: trained[n] for n in param_names()}
    outputs["loss"] = losses
    np.savez(train_dir / "outputs.npz", **outputs)

    print("losses:", " ".join(f"{v:.6f}" for v in losses))
    for n in param_names():
        moved = np.abs(trained[n] - params[n]).max()
        print(f"{n:12s} {str(params[n].shape):9s} max |change| {moved:.4f}")


if __name__ == "__main__":
    main()
