//! Conv, ConvGrad, ConvGradX, ConvGradW: hand-checked values, C kernels
//! against the reference kernels on random problems (groups, depthwise,
//! strides, pads, NCL inputs), the reference against an independent f64
//! convolution, gradients against central finite differences, attribute
//! errors, and the Deeploy kernel tests (when ../shared is present).

use strata::ops::Attribute;
use strata::ops::{Attrs, OpInput, Registry, MS};
use strata::tensor::{max_abs_diff, Tensor, TensorType};
use strata::testing::{attr_i, attr_ints, attr_s, run_both, single_node, In, Rng};

/// Interpreter vs compiled C: same loops, same f32 accumulation order.
const ENGINES_AGREE: f32 = 1e-6;

fn eval(
    domain: &str,
    op: &str,
    attrs: &[Attribute],
    inputs: Vec<Option<Tensor>>,
    want: &[bool],
) -> Vec<Tensor> {
    strata::testing::eval_node(domain, op, attrs, inputs, want).unwrap()
}

fn parse_err(domain: &str, op: &str, attrs: &[Attribute]) -> String {
    let reg = Registry::standard();
    match reg.get(domain, op).unwrap()(&Attrs::new(attrs)) {
        Ok(o) => panic!("{op} accepted bad attributes: {o:?}"),
        Err(e) => e.0,
    }
}

/// A random conv problem: shapes plus attributes.
#[derive(Debug, Clone)]
struct Problem {
    x: Vec<usize>,
    w: Vec<usize>,
    y: Vec<usize>,
    group: usize,
    k: Vec<usize>,
    s: Vec<usize>,
    p: Vec<usize>,
    bias: bool,
}

impl Problem {
    fn random(r: &mut Rng, nsp: usize) -> Problem {
        let n = 1 + r.below(2);
        let kind = r.below(3); // 0 regular, 1 depthwise, 2 grouped
        let (group, cin, cout) = match kind {
            0 => (1, 1 + r.below(3), 1 + r.below(4)),
            1 => {
                let c = 1 + r.below(4);
                (c, c, c * (1 + r.below(2)))
            }
            _ => (2, 2 * (1 + r.below(2)), 2 * (1 + r.below(2))),
        };
        let mut k = vec![];
        let mut s = vec![];
        let mut pb = vec![];
        let mut pe = vec![];
        let mut sp = vec![];
        let mut osp = vec![];
        for _ in 0..nsp {
            let kk = 1 + r.below(3);
            let ss = 1 + r.below(2);
            let (a, b) = (r.below(kk.min(2) + 1), r.below(kk.min(2) + 1));
            let mut i = kk + r.below(6);
            // ConvGradX sees only dY: keep to input sizes it recovers
            // (o * s when consistent, else the smallest; see in_extent).
            let o = (i + a + b - kk) / ss + 1;
            let lo = ((o - 1) * ss + kk) as i64 - (a + b) as i64;
            let rec = if lo <= (o * ss) as i64 && ((o * ss) as i64) < lo + ss as i64 {
                (o * ss) as i64
            } else {
                lo
            };
            if rec >= 1 && (rec as usize + a + b) >= kk && (rec as usize + a + b - kk) / ss + 1 == o
            {
                i = rec as usize;
            }
            k.push(kk);
            s.push(ss);
            pb.push(a);
            pe.push(b);
            sp.push(i);
            osp.push((i + a + b - kk) / ss + 1);
        }
        let mut x = vec![n, cin];
        x.extend(&sp);
        let mut w = vec![cout, cin / group];
        w.extend(&k);
        let mut y = vec![n, cout];
        y.extend(&osp);
        pb.extend(pe);
        Problem {
            x,
            w,
            y,
            group,
            k,
            s,
            p: pb,
            bias: r.below(2) == 0,
        }
    }
    fn attrs(&self) -> Vec<Attribute> {
        let i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        vec![
            attr_i("group", self.group as i64),
            attr_ints("kernel_shape", &i(&self.k)),
            attr_ints("strides", &i(&self.s)),
            attr_ints("pads", &i(&self.p)),
            attr_ints("dilations", &vec![1; self.k.len()]),
        ]
    }
}

/// Independent f64 convolution on `[N, C, spatial...]` (1 or 2 spatial axes).
fn conv64(p: &Problem, x: &[f64], w: &[f64], b: Option<&[f64]>) -> Vec<f64> {
    let four = |s: &[usize]| -> [usize; 4] {
        if s.len() == 3 {
            [s[0], s[1], 1, s[2]]
        } else {
            [s[0], s[1], s[2], s[3]]
        }
    };
    let [n, cin, h, wd] = four(&p.x);
    let [_, cout, oh, ow] = four(&p.y);
    let (kh, kw, sh, sw, pt, pl) = if p.k.len() == 1 {
        (1, p.k[0], 1, p.s[0], 0, p.p[0])
    } else {
        (p.k[0], p.k[1], p.s[0], p.s[1], p.p[0], p.p[1])
    };
    let cig = cin / p.group;
    let cog = cout / p.group;
    let mut y = vec![0f64; n * cout * oh * ow];
    for b_ in 0..n {
        for co in 0..cout {
            let g = co / cog;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[co]);
                    for ci in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * sh + ky) as i64 - pt as i64;
                                let ix = (ox * sw + kx) as i64 - pl as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                let c = g * cig + ci;
                                acc += x[((b_ * cin + c) * h + iy as usize) * wd + ix as usize]
                                    * w[((co * cig + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y[((b_ * cout + co) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    y
}

fn to64(t: &Tensor) -> Vec<f64> {
    t.as_f32().iter().map(|&v| v as f64).collect()
}

#[test]
fn conv_hand_checked() {
    // 3x3 input 1..9, 2x2 kernel of ones, stride 1, no pad: window sums.
    let x = Tensor::f32(vec![1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
    let w = Tensor::f32(vec![1, 1, 2, 2], vec![1.0; 4]);
    let y = eval(
        "",
        "Conv",
        &[],
        vec![Some(x.clone()), Some(w.clone())],
        &[true],
    );
    assert_eq!(y[0].shape, vec![1, 1, 2, 2]);
    assert_eq!(y[0].as_f32(), &[12., 16., 24., 28.]);
    // pad 1, stride 2, bias 10: corners of the padded sums.
    let b = Tensor::f32(vec![1], vec![10.0]);
    let y = eval(
        "",
        "Conv",
        &[
            attr_ints("pads", &[1, 1, 1, 1]),
            attr_ints("strides", &[2, 2]),
        ],
        vec![Some(x), Some(w), Some(b)],
        &[true],
    );
    assert_eq!(y[0].shape, vec![1, 1, 2, 2]);
    assert_eq!(y[0].as_f32(), &[11., 15., 21., 38.]);
    // Depthwise, 1-D: channel c scaled by c+1.
    let x = Tensor::f32(vec![1, 2, 3], vec![1., 2., 3., 4., 5., 6.]);
    let w = Tensor::f32(vec![2, 1, 1], vec![1., 2.]);
    let y = eval(
        "",
        "Conv",
        &[attr_i("group", 2)],
        vec![Some(x), Some(w)],
        &[true],
    );
    assert_eq!(y[0].as_f32(), &[1., 2., 3., 8., 10., 12.]);
}

#[test]
fn conv_reference_matches_f64_and_c_matches_reference() {
    let mut r = Rng(0x5eed_c0de);
    for case in 0..8 {
        let p = Problem::random(&mut r, if case % 4 == 3 { 1 } else { 2 });
        let x = r.tensor(&p.x);
        let w = r.tensor(&p.w);
        let b = r.tensor(&[p.w[0]]);
        let want = conv64(
            &p,
            &to64(&x),
            &to64(&w),
            p.bias.then(|| to64(&b)).as_deref(),
        );
        let mut ins = vec![In::Data(x.ty()), In::Data(w.ty())];
        let mut vals = vec![x.clone(), w.clone()];
        if p.bias {
            ins.push(In::Data(b.ty()));
            vals.push(b.clone());
        }
        let g = single_node("", "Conv", &p.attrs(), ins, &[true]).unwrap();
        let (i, c) = run_both(g, vals).unwrap();
        assert_eq!(i[0].shape, p.y, "{p:?}");
        let err = i[0]
            .as_f32()
            .iter()
            .zip(&want)
            .map(|(a, b)| (*a as f64 - b).abs())
            .fold(0.0, f64::max);
        assert!(err <= 1e-5, "case {case} {p:?}: reference vs f64 {err}");
        let d = max_abs_diff(i[0].as_f32(), c[0].as_f32());
        assert!(d <= ENGINES_AGREE, "case {case} {p:?}: C vs reference {d}");
    }
}

/// dL/dX, dL/dW, dL/dB of L = sum(dY ⊙ conv(X, W, B)) by central differences of [`conv64`].
fn fd_grads(p: &Problem, x: &[f64], w: &[f64], b: &[f64], dy: &[f64]) -> [Vec<f64>; 3] {
    let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
        conv64(p, x, w, Some(b))
            .iter()
            .zip(dy)
            .map(|(a, b)| a * b)
            .sum()
    };
    let h = 1e-3;
    let fd = |v: &[f64], f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> {
        (0..v.len())
            .map(|i| {
                let mut a = v.to_vec();
                a[i] += h;
                let up = f(&a);
                a[i] -= 2.0 * h;
                (up - f(&a)) / (2.0 * h)
            })
            .collect()
    };
    [
        fd(x, &|v| loss(v, w, b)),
        fd(w, &|v| loss(x, v, b)),
        fd(b, &|v| loss(x, w, v)),
    ]
}

/// Gradient tolerance: f32 kernels vs f64 differences, 1e-3 relative to max(1, |g|).
fn grad_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-3 * w.abs().max(1.0),
            "{what}[{k}]: kernel {g}, finite differences {w}"
        );
    }
}

#[test]
fn conv_grad_matches_finite_differences() {
    let mut r = Rng(0xfd_c0417);
    for case in 0..8 {
        let p = Problem::random(&mut r, if case % 4 == 1 { 1 } else { 2 });
        let x = r.tensor(&p.x);
        let w = r.tensor(&p.w);
        let b = r.tensor(&[p.w[0]]);
        let dy = r.tensor(&p.y);
        let [gx, gw, gb] = fd_grads(&p, &to64(&x), &to64(&w), &to64(&b), &to64(&dy));
        let out = eval(
            MS,
            "ConvGrad",
            &p.attrs(),
            vec![Some(dy.clone()), Some(x.clone()), Some(w.clone())],
            &[true, true, true],
        );
        grad_close(out[0].as_f32(), &gx, &format!("case {case} dX"));
        grad_close(out[1].as_f32(), &gw, &format!("case {case} dW"));
        grad_close(out[2].as_f32(), &gb, &format!("case {case} dB"));
        // The halves agree with ConvGrad exactly (same kernels).
        let gxo = eval(
            "",
            "ConvGradX",
            &p.attrs(),
            vec![Some(dy.clone()), Some(w)],
            &[true],
        );
        assert_eq!(gxo[0].shape, p.x, "case {case}: ConvGradX shape");
        assert_eq!(gxo[0].as_f32(), out[0].as_f32());
        let gwo = eval(
            "",
            "ConvGradW",
            &p.attrs(),
            vec![Some(dy), Some(x)],
            &[true],
        );
        assert_eq!(gwo[0].as_f32(), out[1].as_f32());
    }
}

#[test]
fn conv_grad_c_matches_reference() {
    let mut r = Rng(0xc_9bad);
    for case in 0..6 {
        let p = Problem::random(&mut r, if case % 3 == 2 { 1 } else { 2 });
        let x = r.tensor(&p.x);
        let w = r.tensor(&p.w);
        let dy = r.tensor(&p.y);
        // Every third case a different subset of (dX, dW, dB), never empty.
        let want = match case % 3 {
            0 => vec![true, true, true],
            1 => vec![false, true, true],
            _ => vec![true, false],
        };
        let g = single_node(
            MS,
            "ConvGrad",
            &p.attrs(),
            vec![In::Data(dy.ty()), In::Data(x.ty()), In::Data(w.ty())],
            &want,
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy.clone(), x.clone(), w.clone()]).unwrap();
        assert_eq!(i.len(), want.iter().filter(|&&b| b).count());
        for (a, b) in i.iter().zip(&c) {
            let d = max_abs_diff(a.as_f32(), b.as_f32());
            assert!(d <= ENGINES_AGREE, "case {case} {p:?}: C vs reference {d}");
        }
        let full = eval(
            MS,
            "ConvGrad",
            &p.attrs(),
            vec![Some(dy.clone()), Some(x.clone()), Some(w.clone())],
            &[true, true, true],
        );
        let picked: Vec<&Tensor> = full
            .iter()
            .zip(&want)
            .filter(|(_, &w)| w)
            .map(|(t, _)| t)
            .collect();
        for (a, b) in i.iter().zip(picked) {
            assert_eq!(a.as_f32(), b.as_f32(), "case {case}: subset changes values");
        }
        // The halves in C.
        let g = single_node(
            "",
            "ConvGradX",
            &p.attrs(),
            vec![In::Data(dy.ty()), In::Data(w.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy.clone(), w]).unwrap();
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
        let g = single_node(
            "",
            "ConvGradW",
            &p.attrs(),
            vec![In::Data(dy.ty()), In::Data(x.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy, x]).unwrap();
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
    }
}

#[test]
fn conv_grad_x_recovers_input_size() {
    // dY 24x24 from a 3x3, stride 2, pad 1 conv: 47 and 48 both give 24; strata takes 48.
    let dy = Tensor::f32(vec![1, 2, 24, 24], vec![0.0; 2 * 576]);
    let w = Tensor::f32(vec![2, 1, 3, 3], vec![0.0; 18]);
    let a = [
        attr_i("group", 2),
        attr_ints("kernel_shape", &[3, 3]),
        attr_ints("strides", &[2, 2]),
        attr_ints("pads", &[1, 1, 1, 1]),
    ];
    let out = eval("", "ConvGradX", &a, vec![Some(dy), Some(w)], &[true]);
    assert_eq!(out[0].shape, vec![1, 2, 48, 48]);
}

#[test]
fn unsupported_attributes_are_rejected() {
    let e = parse_err("", "Conv", &[attr_ints("dilations", &[2, 2])]);
    assert!(e.contains("dilations"), "{e}");
    let e = parse_err(MS, "ConvGrad", &[attr_s("auto_pad", "SAME_UPPER")]);
    assert!(e.contains("auto_pad"), "{e}");
    let e = parse_err("", "ConvGradW", &[attr_ints("dilations", &[1, 3])]);
    assert!(e.contains("dilations"), "{e}");
    // Shape errors name what is wrong.
    let reg = Registry::standard();
    let op = reg.get("", "Conv").unwrap()(&Attrs::new(&[attr_i("group", 2)])).unwrap();
    let x = TensorType::f32(vec![1, 3, 4, 4]);
    let w = TensorType::f32(vec![2, 1, 3, 3]);
    let ins = [
        Some(OpInput {
            ty: &x,
            value: None,
        }),
        Some(OpInput {
            ty: &w,
            value: None,
        }),
    ];
    let e = op.infer(&ins, 1).unwrap_err().0;
    assert!(e.contains("group"), "{e}");
    // ConvGradW cannot guess the kernel size.
    let op = reg.get("", "ConvGradW").unwrap()(&Attrs::new(&[])).unwrap();
    let dy = TensorType::f32(vec![1, 2, 2, 2]);
    let ins = [
        Some(OpInput {
            ty: &dy,
            value: None,
        }),
        Some(OpInput {
            ty: &x,
            value: None,
        }),
    ];
    let e = op.infer(&ins, 1).unwrap_err().0;
    assert!(e.contains("kernel_shape"), "{e}");
}
