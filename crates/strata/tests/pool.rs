//! MaxPool (+Indices), MaxPoolGrad, AveragePool, AveragePoolGrad,
//! GlobalAveragePool, GlobalAveragePoolGrad: hand-checked values, C kernels
//! against the reference kernels on random problems (NCHW and NCL, strides,
//! pads, count_include_pad both ways), references against independent f64
//! pools, gradients against central finite differences, attribute errors,
//! and the Deeploy kernel tests (when ../shared is present).

use strata::ops::Attribute;
use strata::ops::{Attrs, Registry, MS};
use strata::tensor::{max_abs_diff, Tensor};
use strata::testing::{attr_i, attr_ints, attr_s, run_both, single_node, In, Rng};

/// Interpreter vs compiled C: same loops, same f32 arithmetic.
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

/// A random pool problem whose input size the gradient ops recover from dY.
#[derive(Debug, Clone)]
struct Problem {
    x: Vec<usize>,
    y: Vec<usize>,
    k: Vec<usize>,
    s: Vec<usize>,
    p: Vec<usize>,
}

impl Problem {
    fn random(r: &mut Rng, nsp: usize) -> Problem {
        let (n, c) = (1 + r.below(2), 1 + r.below(3));
        let (mut k, mut s, mut pb, mut pe, mut sp, mut osp) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..nsp {
            let kk = 1 + r.below(3);
            let ss = 1 + r.below(2);
            // Pads summing below the kernel, so no window is all padding.
            let b = r.below(kk);
            let a = r.below(kk - b);
            // The input size the gradient ops recover from an output of o:
            // o * s when consistent, else the smallest (see in_extent).
            let o = 1 + r.below(4);
            let lo = (o - 1) * ss + kk - (a + b);
            let i = if (lo..lo + ss).contains(&(o * ss)) {
                o * ss
            } else {
                lo
            };
            k.push(kk);
            s.push(ss);
            pb.push(a);
            pe.push(b);
            sp.push(i);
            osp.push((i + a + b - kk) / ss + 1);
        }
        let mut x = vec![n, c];
        x.extend(&sp);
        let mut y = vec![n, c];
        y.extend(&osp);
        pb.extend(pe);
        Problem { x, y, k, s, p: pb }
    }
    fn attrs(&self) -> Vec<Attribute> {
        let i = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        vec![
            attr_ints("kernel_shape", &i(&self.k)),
            attr_ints("strides", &i(&self.s)),
            attr_ints("pads", &i(&self.p)),
        ]
    }
    /// (planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl)
    fn dims(&self) -> [usize; 11] {
        let planes = self.x[0] * self.x[1];
        if self.k.len() == 1 {
            [
                planes, 1, self.x[2], 1, self.y[2], 1, self.k[0], 1, self.s[0], 0, self.p[0],
            ]
        } else {
            [
                planes, self.x[2], self.x[3], self.y[2], self.y[3], self.k[0], self.k[1],
                self.s[0], self.s[1], self.p[0], self.p[1],
            ]
        }
    }
}

/// Independent f64 max / average pool (pads excluded from max; the average
/// divides by the window's in-bounds size unless `include_pad`).
fn pool64(p: &Problem, x: &[f64], max: bool, include_pad: bool) -> Vec<f64> {
    let [planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl] = p.dims();
    let mut y = vec![];
    for q in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut vals = vec![];
                for ky in 0..kh {
                    for kx in 0..kw {
                        let iy = (oy * sh + ky) as i64 - pt as i64;
                        let ix = (ox * sw + kx) as i64 - pl as i64;
                        if iy >= 0 && ix >= 0 && iy < h as i64 && ix < w as i64 {
                            vals.push(x[(q * h + iy as usize) * w + ix as usize]);
                        }
                    }
                }
                y.push(if max {
                    vals.iter().cloned().fold(f64::MIN, f64::max)
                } else {
                    let d = if include_pad {
                        (kh * kw) as f64
                    } else {
                        vals.len() as f64
                    };
                    vals.iter().sum::<f64>() / d
                });
            }
        }
    }
    y
}

fn to64(t: &Tensor) -> Vec<f64> {
    t.as_f32().iter().map(|&v| v as f64).collect()
}

fn close64(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{k}]: got {g}, want {w}"
        );
    }
}

/// d/dX of sum(dY ⊙ f(X)) by central differences in f64.
fn fd(x: &[f64], dy: &[f64], f: &dyn Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let h = 1e-4;
    (0..x.len())
        .map(|i| {
            let mut a = x.to_vec();
            let l = |a: &[f64]| f(a).iter().zip(dy).map(|(u, v)| u * v).sum::<f64>();
            a[i] += h;
            let up = l(&a);
            a[i] -= 2.0 * h;
            (up - l(&a)) / (2.0 * h)
        })
        .collect()
}

#[test]
fn maxpool_hand_checked_indices_are_flat_over_the_tensor() {
    // [2, 2, 2, 2]; 2x2 windows: each plane reduces to its max and that max's flat index.
    let x = Tensor::f32(
        vec![2, 2, 2, 2],
        vec![
            1., 4., 3., 2., /* n0 c0 */ 0., -1., 5., 5., /* n0 c1: tie -> first */
            -3., -2., -4., -5., /* n1 c0 */ 7., 8., 9., 6., /* n1 c1 */
        ],
    );
    let out = eval(
        "",
        "MaxPool",
        &[attr_ints("kernel_shape", &[2, 2])],
        vec![Some(x)],
        &[true, true],
    );
    assert_eq!(out[0].as_f32(), &[4., 5., -2., 9.]);
    assert_eq!(out[1].to_i64(), vec![1, 6, 9, 14]);
    // MaxPoolGrad scatters dY to those indices.
    let dy = Tensor::f32(vec![2, 2, 1, 1], vec![10., 20., 30., 40.]);
    let g = eval(
        MS,
        "MaxPoolGrad",
        &[attr_ints("kernel_shape", &[2, 2])],
        vec![Some(dy), Some(out[1].clone())],
        &[true],
    );
    let mut want = [0f32; 16];
    want[1] = 10.;
    want[6] = 20.;
    want[9] = 30.;
    want[14] = 40.;
    assert_eq!(g[0].shape, vec![2, 2, 2, 2]);
    assert_eq!(g[0].as_f32(), &want[..]);
    // Average with a pad: count_include_pad changes the edge divisor.
    let x = Tensor::f32(vec![1, 1, 1, 2], vec![2., 4.]);
    let a = |inc: i64| {
        vec![
            attr_ints("kernel_shape", &[1, 2]),
            attr_ints("pads", &[0, 1, 0, 0]),
            attr_i("count_include_pad", inc),
        ]
    };
    let y = eval("", "AveragePool", &a(0), vec![Some(x.clone())], &[true]);
    assert_eq!(y[0].as_f32(), &[2., 3.]);
    let y = eval("", "AveragePool", &a(1), vec![Some(x)], &[true]);
    assert_eq!(y[0].as_f32(), &[1., 3.]);
}

#[test]
fn pools_match_f64_and_c_matches_reference() {
    let mut r = Rng(0x90012);
    for case in 0..8 {
        let p = Problem::random(&mut r, if case % 4 == 1 { 1 } else { 2 });
        let x = r.tensor(&p.x);
        // MaxPool with and without Indices.
        let want_idx = case % 2 == 0;
        let g = single_node(
            "",
            "MaxPool",
            &p.attrs(),
            vec![In::Data(x.ty())],
            &[true, want_idx],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![x.clone()]).unwrap();
        assert_eq!(i[0].shape, p.y, "{p:?}");
        close64(
            i[0].as_f32(),
            &pool64(&p, &to64(&x), true, false),
            0.0,
            "max",
        );
        assert_eq!(
            i[0].as_f32(),
            c[0].as_f32(),
            "case {case}: MaxPool C vs reference"
        );
        if want_idx {
            assert_eq!(
                i[1].to_i64(),
                c[1].to_i64(),
                "case {case}: Indices C vs reference"
            );
            let xv = x.as_f32();
            for (v, &ix) in i[0].as_f32().iter().zip(&i[1].to_i64()) {
                assert_eq!(
                    xv[ix as usize], *v,
                    "case {case}: index does not point at the max"
                );
            }
        }
        // AveragePool both ways.
        for inc in [0, 1] {
            let mut a = p.attrs();
            a.push(attr_i("count_include_pad", inc));
            let g = single_node("", "AveragePool", &a, vec![In::Data(x.ty())], &[true]).unwrap();
            let (i, c) = run_both(g, vec![x.clone()]).unwrap();
            close64(
                i[0].as_f32(),
                &pool64(&p, &to64(&x), false, inc == 1),
                1e-6,
                "avg",
            );
            let d = max_abs_diff(i[0].as_f32(), c[0].as_f32());
            assert!(
                d <= ENGINES_AGREE,
                "case {case} {p:?}: AveragePool C vs reference {d}"
            );
        }
    }
}

#[test]
fn pool_grads_match_finite_differences_and_c() {
    let mut r = Rng(0x6_7ad);
    for case in 0..6 {
        let p = Problem::random(&mut r, if case % 3 == 2 { 1 } else { 2 });
        let x = r.tensor(&p.x);
        let dy = r.tensor(&p.y);
        // MaxPoolGrad: random inputs have distinct values, so max is differentiable.
        let fwd = eval(
            "",
            "MaxPool",
            &p.attrs(),
            vec![Some(x.clone())],
            &[true, true],
        );
        let gx = eval(
            MS,
            "MaxPoolGrad",
            &p.attrs(),
            vec![Some(dy.clone()), Some(fwd[1].clone())],
            &[true],
        );
        assert_eq!(gx[0].shape, p.x, "case {case}: recovered input shape");
        let want = fd(&to64(&x), &to64(&dy), &|v| pool64(&p, v, true, false));
        close64(
            gx[0].as_f32(),
            &want,
            1e-3,
            &format!("case {case} MaxPoolGrad"),
        );
        let g = single_node(
            MS,
            "MaxPoolGrad",
            &p.attrs(),
            vec![In::Data(dy.ty()), In::Data(fwd[1].ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy.clone(), fwd[1].clone()]).unwrap();
        assert_eq!(i[0].as_f32(), gx[0].as_f32());
        assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
        // AveragePoolGrad both ways.
        for inc in [0, 1] {
            let mut a = p.attrs();
            a.push(attr_i("count_include_pad", inc));
            let gx = eval(MS, "AveragePoolGrad", &a, vec![Some(dy.clone())], &[true]);
            let want = fd(&to64(&x), &to64(&dy), &|v| pool64(&p, v, false, inc == 1));
            close64(
                gx[0].as_f32(),
                &want,
                1e-3,
                &format!("case {case} AveragePoolGrad"),
            );
            let g =
                single_node(MS, "AveragePoolGrad", &a, vec![In::Data(dy.ty())], &[true]).unwrap();
            let (i, c) = run_both(g, vec![dy.clone()]).unwrap();
            assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
        }
    }
}

#[test]
fn global_average_pool_and_grad() {
    let mut r = Rng(0x6a9);
    for (case, shape) in [vec![2, 3, 4, 5], vec![1, 4, 7], vec![3, 2, 1, 1]]
        .into_iter()
        .enumerate()
    {
        let x = r.tensor(&shape);
        let hw: usize = shape[2..].iter().product();
        let g = single_node(
            "",
            "GlobalAveragePool",
            &[],
            vec![In::Data(x.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![x.clone()]).unwrap();
        let mut ys = shape.clone();
        ys[2..].iter_mut().for_each(|d| *d = 1);
        assert_eq!(i[0].shape, ys);
        let want: Vec<f64> = to64(&x)
            .chunks(hw)
            .map(|p| p.iter().sum::<f64>() / hw as f64)
            .collect();
        close64(i[0].as_f32(), &want, 1e-6, "gap");
        assert!(
            max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE,
            "case {case}"
        );
        // Gradient: dY / hw everywhere, against finite differences of the f64 mean.
        let dy = r.tensor(&ys);
        let k: Vec<i64> = shape[2..].iter().map(|&d| d as i64).collect();
        let a = [attr_ints("kernel_shape", &k)];
        let g = single_node(
            MS,
            "GlobalAveragePoolGrad",
            &a,
            vec![In::Data(dy.ty())],
            &[true],
        )
        .unwrap();
        let (i, c) = run_both(g, vec![dy.clone()]).unwrap();
        assert_eq!(i[0].shape, shape);
        let want = fd(&to64(&x), &to64(&dy), &|v| {
            v.chunks(hw)
                .map(|p| p.iter().sum::<f64>() / hw as f64)
                .collect()
        });
        close64(i[0].as_f32(), &want, 1e-3, "gap grad");
        assert!(
            max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE,
            "case {case}"
        );
    }
}

#[test]
fn unsupported_attributes_are_rejected() {
    let k = attr_ints("kernel_shape", &[2, 2]);
    let e = parse_err("", "MaxPool", &[k.clone(), attr_i("ceil_mode", 1)]);
    assert!(e.contains("ceil_mode"), "{e}");
    let e = parse_err("", "MaxPool", &[k.clone(), attr_i("storage_order", 1)]);
    assert!(e.contains("storage_order"), "{e}");
    let e = parse_err(
        "",
        "AveragePool",
        &[k.clone(), attr_ints("dilations", &[2, 1])],
    );
    assert!(e.contains("dilations"), "{e}");
    let e = parse_err("", "AveragePool", &[k.clone(), attr_s("auto_pad", "VALID")]);
    assert!(e.contains("auto_pad"), "{e}");
    let e = parse_err(MS, "AveragePoolGrad", &[k, attr_i("ceil_mode", 1)]);
    assert!(e.contains("ceil_mode"), "{e}");
    let e = parse_err("", "MaxPool", &[]);
    assert!(e.contains("kernel_shape"), "{e}");
    let e = parse_err(MS, "GlobalAveragePoolGrad", &[]);
    assert!(e.contains("kernel_shape"), "{e}");
}

/// MaxPoolGrad indices from a graph input that leave their (n, c) plane:
/// the reference kernel reports them, the C kernel writes nothing out of
/// bounds and raises `st_fault_code`, and the harness stops with an error.
#[test]
fn maxpool_grad_index_out_of_plane_faults_in_c() {
    use strata::tensor::{DType, TensorType};
    use strata::testing::run_c;
    let g = || {
        single_node(
            MS,
            "MaxPoolGrad",
            &[
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
            vec![
                In::Data(TensorType::f32(vec![1, 2, 1, 1])),
                In::Data(TensorType::new(DType::I64, vec![1, 2, 1, 1])),
            ],
            &[true],
        )
        .unwrap()
    };
    let dy = Tensor::f32(vec![1, 2, 1, 1], vec![10., 20.]);
    // Plane 1 holds indices 4..8; 2 belongs to plane 0.
    let bad = Tensor::i64(vec![1, 2, 1, 1], vec![3, 2]);
    let e = run_both(g(), vec![dy.clone(), bad.clone()]).unwrap_err();
    assert!(
        e.to_string().contains("out of range of its plane [4, 8)"),
        "{e}"
    );
    let e = run_c(g(), vec![dy.clone(), bad]).unwrap_err().to_string();
    assert!(
        e.contains("faulted") && e.contains("index out of range"),
        "{e}"
    );
    let (i, c) = run_both(g(), vec![dy, Tensor::i64(vec![1, 2, 1, 1], vec![3, 6])]).unwrap();
    assert_eq!(i[0].as_f32(), &[0., 0., 0., 10., 0., 0., 20., 0.]);
    assert!(max_abs_diff(i[0].as_f32(), c[0].as_f32()) <= ENGINES_AGREE);
}
