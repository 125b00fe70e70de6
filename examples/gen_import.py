#!/usr/bin/env python3
"""Generate the import cases: small graphs spelled the way the peer's tooling
(ONNX Runtime's artifact builder rewritten by Onnx4Deeploy) writes them, one
per item of ../shared/docs/TRAINING_GRAPHS.md section 4, each with a numpy
float64 reference computed here from the op's definition.

Requirements:  pip install numpy onnx       (onnx 1.16; no ONNX Runtime needed:
               most of these spellings are not ONNX Runtime's, so the
               reference is an independent float64 implementation)
Run:           python3 examples/gen_import.py

Writes examples/import/<case>/{network.onnx, inputs.npz, outputs.npz} in the
Deeploy kernel-test layout (inputs by graph input name, outputs by graph
output name), which `strata check` reads; crates/strata/tests/import.rs runs
every case through the interpreter and the compiled C. The graphs are saved
without onnx.checker: several spellings here (a batched Gemm, a repeated
default-domain opset, nodes out of topological order) are exactly what
standard checkers reject and strata must accept.

Deterministic: fixed seeds, npz members with a fixed timestamp.
"""

import io
import math
import shutil
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent / "import"
MS = "com.microsoft"
F = TensorProto.FLOAT


def savez(path: Path, arrays: dict):
    """np.savez with a fixed timestamp, so that the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[k]), allow_pickle=False)
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, buf.getvalue())


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def write(case, nodes, inputs, outputs, ins, refs, inits=(), value_info=(), opsets=None):
    """inputs: {name: f32 array}; refs: {output name: float64 reference}."""
    opsets = opsets or [("", 21), (MS, 1)]
    g = helper.make_graph(
        nodes,
        case,
        [vi(n, list(a.shape), TensorProto.INT64 if a.dtype == np.int64 else F) for n, a in inputs.items()],
        outputs,
        initializer=list(inits),
        value_info=list(value_info),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 9
    d = OUT / case
    d.mkdir(parents=True)
    onnx.save(m, d / "network.onnx")
    savez(d / "inputs.npz", {k: v for k, v in inputs.items()})
    savez(d / "outputs.npz", {k: np.asarray(v, dtype=np.float32) for k, v in refs.items()})


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(a):
    return np.asarray(a, dtype=np.float64)


# ------------------------------------------------------------ graph level


def unsorted(rng):
    """Nodes out of topological order (the fused Gemm and the Reshapes around
    a Softmax appended at the end, as the peer's rewriter leaves them), the
    default domain imported three times (21, 21, 17), value_info with
    UNDEFINED element types and one with an empty name, an unused
    initializer, and a Squeeze whose axes is a single INT."""
    x, w, b = rand(rng, 2, 3, 4), rand(rng, 4, 5), rand(rng, 5)
    nodes = [
        helper.make_node("Relu", ["g"], ["r"], name="relu"),
        helper.make_node("Softmax", ["r2"], ["s2"], name="softmax", axis=-1),
        helper.make_node("Squeeze", ["s3"], ["y"], name="squeeze", axes=0),
        helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fused_gemm"),
        helper.make_node("Reshape", ["r", "shape_in"], ["r2"], name="reshape_in"),
        helper.make_node("Reshape", ["s2", "shape_out"], ["s3"], name="reshape_out"),
    ]
    inits = [
        numpy_helper.from_array(np.array([6, 5], np.int64), "shape_in"),
        numpy_helper.from_array(np.array([1, 2, 3, 5], np.int64), "shape_out"),
        numpy_helper.from_array(np.array([1.0], np.float32), "unused_loss_seed"),
    ]
    value_info = [
        vi("g", [2, 3, 5], TensorProto.UNDEFINED),
        vi("r", [2, 3, 5], TensorProto.UNDEFINED),
        vi("r2", [6, 5], TensorProto.UNDEFINED),
        vi("s2", [6, 5]),
        vi("s3", [1, 2, 3, 5], TensorProto.UNDEFINED),
        vi("", [7], TensorProto.UNDEFINED),
    ]
    gv = np.maximum(f64(x) @ f64(w) + f64(b), 0).reshape(6, 5)
    e = np.exp(gv - gv.max(axis=1, keepdims=True))
    y = (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 5)
    write(
        "unsorted",
        nodes,
        {"x": x, "w": w, "b": b},
        [vi("y", [2, 3, 5])],
        {"x": x, "w": w, "b": b},
        {"y": y},
        inits=inits,
        value_info=value_info,
        opsets=[("", 21), ("", 21), ("", 17), (MS, 1)],
    )


def int_axes(rng):
    """Squeeze/Unsqueeze axes as a single INT at opset 21, ReduceSum axes as
    an unsorted attribute at opset 21, ReduceMean axes as an unsorted input."""
    x = rand(rng, 3, 1, 4, 2)
    nodes = [
        helper.make_node("Squeeze", ["x"], ["sq"], axes=1),
        helper.make_node("Unsqueeze", ["sq"], ["us"], axes=-1),
        helper.make_node("ReduceSum", ["us"], ["rs"], axes=[1, 0], keepdims=0),
        helper.make_node("ReduceMean", ["x", "rm_axes"], ["rm"], keepdims=1),
    ]
    inits = [numpy_helper.from_array(np.array([2, 1], np.int64), "rm_axes")]
    xs = f64(x)[:, 0, :, :, None]
    write(
        "int_axes",
        nodes,
        {"x": x},
        [vi("rs", [2, 1]), vi("rm", [3, 1, 1, 2])],
        {"x": x},
        {"rs": xs.sum(axis=(0, 1)), "rm": f64(x).mean(axis=(1, 2), keepdims=True)},
        inits=inits,
    )


# ------------------------------------------------------------ batched Gemm


def gemm_ref(a, b, c, ta, tb, alpha=1.0, beta=1.0):
    a, b = f64(a), f64(b)
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    y = alpha * np.matmul(a, b)
    if c is not None:
        y = y + beta * f64(c)
    return y


def gemm_case(rng, case, ashape, bshape, cshape, ta=0, tb=0, alpha=1.0, beta=1.0):
    a, b = rand(rng, *ashape), rand(rng, *bshape)
    ins = {"a": a, "b": b}
    names = ["a", "b"]
    c = None
    if cshape is not None:
        c = rand(rng, *cshape)
        ins["c"] = c
        names.append("c")
    y = gemm_ref(a, b, c, ta, tb, alpha, beta)
    node = helper.make_node("Gemm", names, ["y"], transA=ta, transB=tb, alpha=alpha, beta=beta)
    write(case, [node], ins, [vi("y", list(y.shape))], ins, {"y": y})


# ------------------------------------------------------------ gradient ops


def maxpool_grad(rng, case, shape, k, s, p, domain):
    """MaxPoolGrad(dY, X): the argmax recomputed per window, first strict
    maximum in row-major window order, padded cells skipped; X holds ties
    (rounded values) so that the order matters."""
    x = np.round(rand(rng, *shape) * 2) / 2
    n, c, h, w = shape
    oh = (h + 2 * p - k) // s + 1
    ow = (w + 2 * p - k) // s + 1
    dy = rand(rng, n, c, oh, ow)
    dx = np.zeros(shape)
    for a in range(n):
        for ch in range(c):
            for oy in range(oh):
                for ox in range(ow):
                    best, at = -math.inf, None
                    for ky in range(k):
                        for kx in range(k):
                            iy, ix = oy * s - p + ky, ox * s - p + kx
                            if 0 <= iy < h and 0 <= ix < w and x[a, ch, iy, ix] > best:
                                best, at = x[a, ch, iy, ix], (iy, ix)
                    dx[a, ch, at[0], at[1]] += dy[a, ch, oy, ox]
    node = helper.make_node(
        "MaxPoolGrad", ["dy", "x"], ["dx"], domain=domain,
        kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, auto_pad="NOTSET",
    )
    ins = {"dy": dy, "x": x}
    write(case, [node], ins, [vi("dx", list(shape))], ins, {"dx": dx})


def layernorm_grad(rng, case, domain):
    """(dY, X, scale, mean, inv_std_dev) -> (dX, dscale, dbias), mean and
    inv_std_dev of shape [..., 1], inv_std_dev = 1/sqrt(biased var + eps)."""
    eps = 1e-5
    x, dy, sc = rand(rng, 2, 3, 8), rand(rng, 2, 3, 8), rand(rng, 8)
    xd = f64(x)
    # The statistics are inputs: the gradient is the one of these float32 values.
    mean = xd.mean(axis=-1, keepdims=True).astype(np.float32)
    inv = (1.0 / np.sqrt(((xd - mean) ** 2).mean(axis=-1, keepdims=True) + eps)).astype(np.float32)
    mean, inv = f64(mean), f64(inv)
    xh = (xd - mean) * inv
    g = f64(dy) * f64(sc)
    dx = inv * (g - g.mean(axis=-1, keepdims=True) - xh * (g * xh).mean(axis=-1, keepdims=True))
    dscale = (f64(dy) * xh).sum(axis=(0, 1))
    dbias = f64(dy).sum(axis=(0, 1))
    node = helper.make_node(
        "LayerNormalizationGrad", ["dy", "x", "scale", "mean", "inv_std"],
        ["dx", "dscale", "dbias"], domain=domain, axis=-1, epsilon=eps,
    )
    ins = {"dy": dy, "x": x, "scale": sc, "mean": mean.astype(np.float32),
           "inv_std": inv.astype(np.float32)}
    outs = [vi("dx", [2, 3, 8]), vi("dscale", [8]), vi("dbias", [8])]
    write(case, [node], ins, outs, ins, {"dx": dx, "dscale": dscale, "dbias": dbias})


def gelu_pdf(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def gelu_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def gelu_grad(rng, case, domain):
    """GeluGrad(dY, X), X the pre-activation; Gelu the exact erf form."""
    x, dy = rand(rng, 2, 16) * 2, rand(rng, 2, 16)
    xd = f64(x)
    nodes = [
        helper.make_node("GeluGrad", ["dy", "x"], ["dx"], domain=domain),
        helper.make_node("Gelu", ["x"], ["y"], domain=domain),
    ]
    ins = {"dy": dy, "x": x}
    refs = {"dx": f64(dy) * (gelu_cdf(xd) + xd * gelu_pdf(xd)), "y": xd * gelu_cdf(xd)}
    write(case, nodes, ins, [vi("dx", [2, 16]), vi("y", [2, 16])], ins, refs)


def mse(rng, case, domain, shape=(4, 6)):
    """MSELoss(pred, target) = mean squared error; MSELossGrad(pred, target)
    = 2 (pred - target) / numel, without dY."""
    p, t = rand(rng, *shape), rand(rng, *shape)
    d = f64(p) - f64(t)
    nodes = [
        helper.make_node("MSELoss", ["pred", "target"], ["loss"], domain=domain),
        helper.make_node("MSELossGrad", ["pred", "target"], ["grad"], domain=domain),
    ]
    ins = {"pred": p, "target": t}
    refs = {"loss": np.array((d * d).mean()), "grad": 2 * d / d.size}
    write(case, nodes, ins, [vi("loss", []), vi("grad", list(shape))], ins, refs)


def sce(rng, case, b, c, reduction, weighted, ignore):
    """SoftmaxCrossEntropyLoss(X, labels[, weight]) -> (loss, log_prob) and
    ORT's SoftmaxCrossEntropyLossGrad(dY, log_prob, labels[, weight]) -> dX.
    Rows whose label is `ignore` weigh 0; a mean divides by the weight of
    the batch's other rows."""
    x = 3 * rand(rng, b, c)
    labels = rng.integers(0, c, size=b).astype(np.int64)
    attrs = {"reduction": reduction}
    if ignore is not None:
        labels[::7] = ignore
        attrs["ignore_index"] = ignore
    w = (rng.random(c) + 0.5).astype(np.float32) if weighted else None
    dy = rand(rng) if reduction != "none" else rand(rng, b)
    xs = f64(x)
    logp = xs - xs.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    keep = labels != (ignore if ignore is not None else -(2**62))
    rw = np.where(keep, f64(w)[np.where(keep, labels, 0)] if weighted else 1.0, 0.0)
    per = -rw * logp[np.arange(b), np.where(keep, labels, 0)]
    onehot = np.zeros((b, c))
    onehot[np.arange(b)[keep], labels[keep]] = 1.0
    if reduction == "none":
        loss, scale = per, f64(dy) * rw
    elif reduction == "sum":
        loss, scale = per.sum(), f64(dy) * rw
    else:
        loss, scale = per.sum() / rw.sum(), f64(dy) * rw / rw.sum()
    dx = (np.exp(logp) - onehot) * scale[:, None]
    ins = {"x": x, "labels": labels, "dy": dy}
    names = ["x", "labels"]
    if weighted:
        ins["w"] = w
        names.append("w")
    nodes = [
        helper.make_node("SoftmaxCrossEntropyLoss", names, ["loss", "log_prob"], **attrs),
        helper.make_node("SoftmaxCrossEntropyLossGrad", ["dy", "log_prob"] + names[1:], ["dx"],
                         domain=MS, **attrs),
    ]
    refs = {"loss": loss, "log_prob": logp, "dx": dx}
    outs = [vi("loss", list(np.shape(loss))), vi("log_prob", [b, c]), vi("dx", [b, c])]
    write(case, nodes, ins, outs, ins, refs)


def gap_grad(rng, case, domain):
    """GlobalAveragePoolGrad(dY) with kernel_shape = [H, W]: dY / (H W)."""
    dy = rand(rng, 2, 3, 1, 1)
    node = helper.make_node("GlobalAveragePoolGrad", ["dy"], ["dx"], domain=domain,
                            kernel_shape=[4, 5])
    dx = np.broadcast_to(f64(dy) / 20.0, (2, 3, 4, 5))
    write(case, [node], {"dy": dy}, [vi("dx", [2, 3, 4, 5])], {"dy": dy}, {"dx": dx})


def conv_out(h, k, s, p):
    return (h + 2 * p - k) // s + 1


def conv_grads(x, w, dy, s, p, group):
    """f64 dX and dW of Y = conv(X, W) (NCHW, square kernel, symmetric pad)."""
    n, cin, h, wd = x.shape
    cout, cpg, k, _ = w.shape
    opg = cout // group
    oh, ow = dy.shape[2], dy.shape[3]
    dx, dw = np.zeros(x.shape), np.zeros(w.shape)
    for a in range(n):
        for co in range(cout):
            gi = co // opg
            for ci in range(cpg):
                cx = gi * cpg + ci
                for ky in range(k):
                    for kx in range(k):
                        for oy in range(oh):
                            iy = oy * s - p + ky
                            if not 0 <= iy < h:
                                continue
                            for ox in range(ow):
                                ix = ox * s - p + kx
                                if not 0 <= ix < wd:
                                    continue
                                g = dy[a, co, oy, ox]
                                dx[a, cx, iy, ix] += g * w[co, ci, ky, kx]
                                dw[co, ci, ky, kx] += g * x[a, cx, iy, ix]
    return dx, dw


def conv_grad(rng, case, domain, with_dx, group=1):
    """ConvGrad(dY, X, W) -> (dX, dW) with the forward attributes copied
    explicitly; dX the empty name when `with_dx` is false."""
    cin, cout, k, s, p = 4, 4 if group > 1 else 3, 3, 1, 1
    x = rand(rng, 2, cin, 5, 5)
    w = rand(rng, cout, cin // group, k, k)
    oh = conv_out(5, k, s, p)
    dy = rand(rng, 2, cout, oh, oh)
    dx, dw = conv_grads(f64(x), f64(w), f64(dy), s, p, group)
    node = helper.make_node(
        "ConvGrad", ["dy", "x", "w"], ["dx" if with_dx else "", "dw"], domain=domain,
        kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, dilations=[1, 1], group=group,
        auto_pad="NOTSET",
    )
    ins = {"dy": dy, "x": x, "w": w}
    outs, refs = [vi("dw", list(w.shape))], {"dw": dw}
    if with_dx:
        outs.insert(0, vi("dx", list(x.shape)))
        refs["dx"] = dx
    write(case, [node], ins, outs, ins, refs)


def conv_grad_x(rng, case, hx):
    """ConvGradX(dY, W) -> dX with dY 3x3, stride 2, pad 1, kernel 3: dX may
    be 5x5 or 6x6; only the declared output says which."""
    cin, cout, k, s, p = 2, 3, 3, 2, 1
    x = np.zeros((1, cin, hx, hx))
    w = rand(rng, cout, cin, k, k)
    oh = conv_out(hx, k, s, p)
    assert oh == 3
    dy = rand(rng, 1, cout, oh, oh)
    dx, _ = conv_grads(x, f64(w), f64(dy), s, p, 1)
    node = helper.make_node("ConvGradX", ["dy", "w"], ["dx"], kernel_shape=[k, k],
                            strides=[s, s], pads=[p] * 4, group=1)
    ins = {"dy": dy, "w": w}
    write(case, [node], ins, [vi("dx", [1, cin, hx, hx])], ins, {"dx": dx})


def conv_grad_x_rows(rng, case, cin, cout, group, hw, k, s, p):
    """ConvGradX(dY, W) -> dX (batch 2) at stride s, large enough that a
    small L1 cuts dX's rows; dX is declared, as dY alone may not give its
    size (rows and columns past the last window)."""
    w = rand(rng, cout, cin // group, k, k)
    dy = rand(rng, 2, cout, conv_out(hw[0], k, s, p), conv_out(hw[1], k, s, p))
    dx, _ = conv_grads(np.zeros((2, cin, *hw)), f64(w), f64(dy), s, p, group)
    node = helper.make_node("ConvGradX", ["dy", "w"], ["dx"], kernel_shape=[k, k],
                            strides=[s, s], pads=[p] * 4, group=group)
    ins = {"dy": dy, "w": w}
    write(case, [node], ins, [vi("dx", list(dx.shape))], ins, {"dx": dx})


def conv_fwd(x, w, b, s, pads, group):
    """f64 Y = conv(X, W) + B (NCHW; strides (sh, sw); pads [t, l, b, r])."""
    n, cin, h, wd = x.shape
    cout, cpg, kh, kw = w.shape
    opg = cout // group
    pt, pl, pb, pr = pads
    xp = np.zeros((n, cin, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - kh) // s[0] + 1
    ow = (wd + pl + pr - kw) // s[1] + 1
    y = np.zeros((n, cout, oh, ow))
    for co in range(cout):
        xs = xp[:, (co // opg) * cpg:(co // opg + 1) * cpg]
        for oy in range(oh):
            for ox in range(ow):
                win = xs[:, :, oy * s[0]:oy * s[0] + kh, ox * s[1]:ox * s[1] + kw]
                y[:, co, oy, ox] = (win * w[co]).sum(axis=(1, 2, 3))
        if b is not None:
            y[:, co] += b[co]
    return y


def conv_grouped(rng, case, cin, cout, group, hw, k, s, pads, bias):
    """Conv with groups: depthwise (cout == cin == group) or a channel
    multiplier (cout > cin == group); large enough that a small L1 cuts its
    output rows."""
    x = rand(rng, 1, cin, *hw)
    w = rand(rng, cout, cin // group, k, k)
    b = rand(rng, cout) if bias else None
    y = conv_fwd(f64(x), f64(w), None if b is None else f64(b), s, pads, group)
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"],
                            kernel_shape=[k, k], strides=list(s), pads=list(pads), group=group)
    ins = {"x": x, "w": w} | ({"b": b} if bias else {})
    write(case, [node], ins, [vi("y", list(y.shape))], ins, {"y": y})


def conv_grad_rows(rng, case, op, hw, s, cin=4, cout=4, group=4):
    """A grouped ConvGrad (dX and dW) or ConvGradX (dX), depthwise unless
    told otherwise, large enough that a small L1 cuts dX's rows."""
    k, p = 3, 1
    x = rand(rng, 2, cin, *hw)
    w = rand(rng, cout, cin // group, k, k)
    dy = rand(rng, 2, cout, conv_out(hw[0], k, s, p), conv_out(hw[1], k, s, p))
    dx, dw = conv_grads(f64(x), f64(w), f64(dy), s, p, group)
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=group)
    if op == "ConvGrad":
        node = helper.make_node("ConvGrad", ["dy", "x", "w"], ["dx", "dw"], domain=MS,
                                dilations=[1, 1], auto_pad="NOTSET", **attrs)
        ins = {"dy": dy, "x": x, "w": w}
        outs, refs = [vi("dx", list(x.shape)), vi("dw", list(w.shape))], {"dx": dx, "dw": dw}
    else:
        node = helper.make_node("ConvGradX", ["dy", "w"], ["dx"], **attrs)
        ins = {"dy": dy, "w": w}
        outs, refs = [vi("dx", list(x.shape))], {"dx": dx}
    write(case, [node], ins, outs, ins, refs)


def pad_case(rng, case, shape, begin, end, mode, value=0.0, axes=None, opset=21):
    """Pad X by `begin`/`end` (over `axes`, or every axis) in `mode`; from
    opset 11 the pads, the value and the axes are constant inputs, before it
    attributes."""
    x = rand(rng, *shape)
    full_b, full_e = [0] * len(shape), [0] * len(shape)
    for k, a in enumerate(axes if axes is not None else range(len(shape))):
        full_b[a], full_e[a] = begin[k], end[k]
    widths = list(zip(full_b, full_e))
    if mode == "constant":
        y = np.pad(f64(x), widths, mode="constant", constant_values=value)
    else:
        y = np.pad(f64(x), widths, mode=mode)
    if opset < 11:
        node = helper.make_node("Pad", ["x"], ["y"], mode=mode, pads=begin + end, value=value)
        inits = []
    else:
        names = ["x", "pads", "value"] + (["axes"] if axes is not None else [])
        node = helper.make_node("Pad", names, ["y"], mode=mode)
        inits = [numpy_helper.from_array(np.array(begin + end, np.int64), "pads"),
                 numpy_helper.from_array(np.array(value, np.float32), "value")]
        if axes is not None:
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    write(case, [node], {"x": x}, [vi("y", list(y.shape))], {"x": x}, {"y": y}, inits=inits,
          opsets=[("", opset), (MS, 1)])


def softmax_grad_axis1(rng):
    """SoftmaxGrad(dY, Y) along axis 1 of a [1, 64, 1] tensor."""
    z = f64(rand(rng, 1, 64, 1))
    y = np.exp(z - z.max(axis=1, keepdims=True))
    y = (y / y.sum(axis=1, keepdims=True)).astype(np.float32)
    dy = rand(rng, 1, 64, 1)
    dx = f64(y) * (f64(dy) - (f64(dy) * f64(y)).sum(axis=1, keepdims=True))
    node = helper.make_node("SoftmaxGrad", ["dy", "y"], ["dx"], domain=MS, axis=1)
    ins = {"dy": dy, "y": y}
    write("softmax_grad_axis1", [node], ins, [vi("dx", [1, 64, 1])], ins, {"dx": dx})


def broadcast_low_rank_first(rng):
    """Add and Mul with the lower-rank operand first."""
    a, b, c = rand(rng, 4), rand(rng, 2, 3, 4), rand(rng, 3, 1)
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Mul", ["c", "s"], ["y"]),
    ]
    ins = {"a": a, "b": b, "c": c}
    y = f64(c) * (f64(a) + f64(b))
    write("broadcast_low_rank_first", nodes, ins, [vi("y", [2, 3, 4])], ins, {"y": y})


def pow_exponents(rng):
    """Pow with a scalar, a [1] and a full-shape exponent."""
    x = np.abs(rand(rng, 2, 5)) + 0.5
    e_full = rand(rng, 2, 5)
    nodes = [
        helper.make_node("Pow", ["x", "e0"], ["y0"]),
        helper.make_node("Pow", ["x", "e1"], ["y1"]),
        helper.make_node("Pow", ["x", "ef"], ["yf"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(2.0, np.float32), "e0"),
        numpy_helper.from_array(np.array([0.5], np.float32), "e1"),
    ]
    ins = {"x": x, "ef": e_full}
    refs = {"y0": f64(x) ** 2.0, "y1": f64(x) ** 0.5, "yf": f64(x) ** f64(e_full)}
    outs = [vi("y0", [2, 5]), vi("y1", [2, 5]), vi("yf", [2, 5])]
    write("pow_exponents", nodes, ins, outs, ins, refs, inits=inits)


def unused_outputs(rng):
    """Outputs nothing reads: MaxPool's mask (declared with an UNDEFINED
    type), LayerNormalization's mean and inv_std_dev, and optional outputs
    left out as the empty name (BatchNormInternal's running and saved
    statistics)."""
    x = rand(rng, 1, 2, 4, 6)
    sc, b = rand(rng, 3), rand(rng, 3)
    bs, bb = rand(rng, 2), rand(rng, 2)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p", "mask"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("LayerNormalization", ["p", "scale", "bias"], ["y", "mean", "inv_std"],
                         axis=-1, epsilon=1e-5),
        helper.make_node("BatchNormInternal", ["x", "bn_s", "bn_b", "bn_m", "bn_v"],
                         ["z", "", "", "", ""], domain=MS, epsilon=1e-5, momentum=0.9),
    ]
    inits = [
        numpy_helper.from_array(np.zeros(2, np.float32), "bn_m"),
        numpy_helper.from_array(np.ones(2, np.float32), "bn_v"),
    ]
    value_info = [vi("mask", [1, 2, 2, 3], TensorProto.UNDEFINED), vi("mean", [1, 2, 2, 1]),
                  vi("inv_std", [1, 2, 2, 1])]
    p = f64(x).reshape(1, 2, 2, 2, 3, 2).max(axis=(3, 5))
    m = p.mean(axis=-1, keepdims=True)
    v = ((p - m) ** 2).mean(axis=-1, keepdims=True)
    y = (p - m) / np.sqrt(v + 1e-5) * f64(sc) + f64(b)
    xm = f64(x).mean(axis=(0, 2, 3), keepdims=True)
    xv = ((f64(x) - xm) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    z = (f64(x) - xm) / np.sqrt(xv + 1e-5) * f64(bs).reshape(1, 2, 1, 1) + f64(bb).reshape(1, 2, 1, 1)
    ins = {"x": x, "scale": sc, "bias": b, "bn_s": bs, "bn_b": bb}
    write("unused_outputs", nodes, ins, [vi("y", [1, 2, 2, 3]), vi("z", [1, 2, 4, 6])], ins,
          {"y": y, "z": z}, inits=inits, value_info=value_info, opsets=[("", 15), (MS, 1)])


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    rng = np.random.default_rng(11)
    unsorted(rng)
    int_axes(rng)
    gemm_case(rng, "gemm_2d_bias_mn", (4, 3), (5, 3), (4, 5), tb=1, alpha=0.5, beta=2.0)
    gemm_case(rng, "gemm_no_c_beta1", (4, 3), (3, 5), None, beta=1.0)
    gemm_case(rng, "gemm_3d_2d", (2, 4, 3), (3, 5), (5,))
    gemm_case(rng, "gemm_3d_3d_trans", (2, 3, 4), (2, 5, 3), (4, 5), ta=1, tb=1)
    gemm_case(rng, "gemm_4d_4d_broadcast", (2, 1, 4, 3), (1, 3, 3, 5), (5,))
    maxpool_grad(rng, "maxpool_grad_x_overlap", (1, 2, 5, 5), 3, 1, 1, MS)
    maxpool_grad(rng, "maxpool_grad_x_s2", (2, 2, 4, 6), 2, 2, 0, "")
    layernorm_grad(rng, "layernorm_grad_ms", MS)
    layernorm_grad(rng, "layernorm_grad_default", "")
    gelu_grad(rng, "gelu_grad_default", "")
    gelu_grad(rng, "gelu_grad_ms", MS)
    mse(rng, "mse_default", "")
    mse(rng, "mse_ms", MS)
    gap_grad(rng, "gap_grad_default", "")
    gap_grad(rng, "gap_grad_ms", MS)
    conv_grad(rng, "conv_grad_ms_no_dx", MS, with_dx=False)
    conv_grad(rng, "conv_grad_default", "", with_dx=True)
    conv_grad(rng, "conv_grad_depthwise", MS, with_dx=True, group=4)
    conv_grad_x(rng, "conv_grad_x_s2_6x6", 6)
    conv_grad_x(rng, "conv_grad_x_s2_5x5", 5)
    softmax_grad_axis1(rng)
    broadcast_low_rank_first(rng)
    pow_exponents(rng)
    unused_outputs(rng)
    # Tiled by output rows at a small L1 (tests/tiling.rs).
    conv_grouped(rng, "conv_depthwise_rows", 4, 4, 4, (20, 12), 3, (1, 1), (1, 1, 1, 1), True)
    conv_grouped(rng, "conv_grouped_rows", 2, 4, 2, (23, 11), 3, (2, 1), (2, 1, 0, 1), False)
    conv_grad_rows(rng, "conv_grad_depthwise_rows", "ConvGrad", (15, 9), 2)
    conv_grad_rows(rng, "conv_grad_x_depthwise_rows", "ConvGradX", (16, 10), 1)
    pad_case(rng, "pad_constant_rows", (1, 3, 10, 7), [1, 3, 0], [0, 2, 4], "constant",
             value=0.5, axes=[1, 2, 3])
    pad_case(rng, "pad_attr_rows", (2, 3, 8, 6), [0, 0, 2, 1], [0, 0, 3, 1], "constant",
             value=-1.0, opset=10)
    pad_case(rng, "pad_reflect", (2, 4, 9, 6), [0, 0, 2, 1], [0, 0, 1, 2], "reflect")
    # Cut across tiles at a small L1 (tests/tiling.rs): the loss sums over
    # tiles, its gradient element-wise; strided ConvGradX by rows of dX
    # (ungrouped with a row past the last window, depthwise, and a 1x1
    # kernel whose windows skip every other row).
    mse(rng, "mse_tiled", MS, shape=(6, 40))
    conv_grad_x_rows(rng, "conv_grad_x_s2_rows", 3, 4, 1, (14, 10), 3, 2, 1)
    conv_grad_x_rows(rng, "conv_grad_x_depthwise_s2_rows", 4, 4, 4, (13, 9), 3, 2, 1)
    conv_grad_x_rows(rng, "conv_grad_x_1x1_s2_rows", 4, 6, 1, (12, 8), 1, 2, 0)
    # Softmax cross-entropy by rows at a small L1 (tests/tiling.rs): a mean
    # with class weights and ignored rows, split into per-row losses and
    # their reduction; a sum; per-row losses (reduction none).
    sce(rng, "sce_mean_tiled", 48, 40, "mean", True, -1)
    sce(rng, "sce_sum_tiled", 30, 24, "sum", False, None)
    sce(rng, "sce_none_tiled", 20, 36, "none", True, 3)
    # Gradients of grouped convolutions that are not depthwise, by rows at a
    # small L1 (tests/tiling.rs): two groups of two input and three output
    # channels (ConvGrad, stride 2), and a channel multiplier (ConvGradX).
    conv_grad_rows(rng, "conv_grad_grouped_rows", "ConvGrad", (15, 9), 2, cin=4, cout=6, group=2)
    conv_grad_rows(rng, "conv_grad_x_multiplier_rows", "ConvGradX", (16, 10), 1, cin=3, cout=6,
                   group=3)


if __name__ == "__main__":
    main()
