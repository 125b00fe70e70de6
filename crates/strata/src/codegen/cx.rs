//! The C spelling of the ops' kernel calls ([`crate::ops::KernelCall`]):
//! every call has the PULP shape, an argument struct, then a fork over the
//! cluster's cores: `{ static f_args a; a = (f_args){ .x = ... }; st_fork(f, &a); }`.

use crate::ops::{Arg, KernelCall, OpError, Slot};

/// A kernel call's operands as typed C pointer expressions, by position
/// (`None` where absent), e.g. `((float *)(st_l1 + 1024))`.
pub struct Pointers {
    pub inputs: Vec<Option<String>>,
    pub outputs: Vec<Option<String>>,
}

impl Pointers {
    fn get(&self, s: Slot) -> Option<&str> {
        match s {
            Slot::Input(i) => self.inputs.get(i),
            Slot::Output(i) => self.outputs.get(i),
        }
        .and_then(|o| o.as_deref())
    }
    fn required(&self, s: Slot) -> Result<&str, OpError> {
        self.get(s).ok_or_else(|| match s {
            Slot::Input(i) => crate::op_err!("missing required input {i}"),
            Slot::Output(i) => crate::op_err!("missing required output {i}"),
        })
    }
}

/// The C value of one field.
fn arg(a: &Arg, p: &Pointers) -> Result<String, OpError> {
    Ok(match a {
        Arg::Ptr(s) => p.required(*s)?.to_string(),
        Arg::OptPtr(s) => p.get(*s).unwrap_or("NULL").to_string(),
        Arg::Null => "NULL".to_string(),
        Arg::Bytes(s @ Slot::Input(_)) => format!("(const void *){}", p.required(*s)?),
        Arg::Bytes(s @ Slot::Output(_)) => format!("(void *){}", p.required(*s)?),
        Arg::Ptrs(v) => {
            let v = v
                .iter()
                .map(|&i| p.required(Slot::Input(i)))
                .collect::<Result<Vec<_>, _>>()?;
            format!("{{{}}}", v.join(", "))
        }
        Arg::First(i) => format!("{}[0]", p.required(Slot::Input(*i))?),
        Arg::InvFirst(i) => format!("1.0f / {}[0]", p.required(Slot::Input(*i))?),
        Arg::Int(v) => v.to_string(),
        Arg::Index(Some(v)) => format!("{v}LL"),
        Arg::Index(None) => "ST_NO_IGNORE".to_string(),
        Arg::Float(x) => c_float(*x),
        Arg::Ints(v) => c_array(v),
    })
}

/// `{ static <func>_args a; a = (<func>_args){ .f = v, ... }; st_fork(<func>, &a); }`.
pub fn kernel_call(call: &KernelCall, p: &Pointers) -> Result<String, OpError> {
    let func = call.func;
    let mut s = format!("{{ static {func}_args a; a = ({func}_args){{");
    for (i, (k, v)) in call.args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(" .{k} = {}", arg(v, p)?));
    }
    s.push_str(&format!(" }}; st_fork({func}, &a); }}"));
    Ok(s)
}

/// A C array initializer `{a, b, c}`.
pub fn c_array<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", items.join(", "))
}

/// A C literal that reads back as exactly `x` (shortest round-trip form).
pub fn c_float(x: f32) -> String {
    if x.is_nan() {
        "NAN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "INFINITY" } else { "(-INFINITY)" }.to_string()
    } else {
        let s = format!("{x:?}");
        let s = if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        };
        format!("{s}f")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arg_spells_as_the_runtime_expects() {
        let p = Pointers {
            inputs: vec![
                Some("((float *)(st_l1 + 0))".into()),
                None,
                Some("X2".into()),
            ],
            outputs: vec![Some("((int64_t *)(st_l2 + 16))".into())],
        };
        let call = KernelCall::new(
            "st_k",
            vec![
                ("a", Arg::input(0)),
                ("b", Arg::opt_input(1)),
                ("c", Arg::opt_output(0)),
                ("d", Arg::Null),
                ("e", Arg::Bytes(Slot::Input(2))),
                ("f", Arg::Bytes(Slot::Output(0))),
                ("g", Arg::Ptrs(vec![0, 2])),
                ("h", Arg::First(2)),
                ("i", Arg::InvFirst(2)),
                ("j", Arg::int(7usize)),
                ("k", Arg::Index(Some(-100))),
                ("l", Arg::Index(None)),
                ("m", Arg::Float(0.5)),
                ("n", Arg::Float(f32::NEG_INFINITY)),
                ("o", Arg::dims8(&[2, 3], 1)),
            ],
        );
        assert_eq!(
            kernel_call(&call, &p).unwrap(),
            "{ static st_k_args a; a = (st_k_args){ .a = ((float *)(st_l1 + 0)), .b = NULL, \
             .c = ((int64_t *)(st_l2 + 16)), .d = NULL, .e = (const void *)X2, \
             .f = (void *)((int64_t *)(st_l2 + 16)), .g = {((float *)(st_l1 + 0)), X2}, \
             .h = X2[0], .i = 1.0f / X2[0], .j = 7, .k = -100LL, .l = ST_NO_IGNORE, \
             .m = 0.5f, .n = (-INFINITY), .o = {2, 3, 1, 1, 1, 1, 1, 1} }; st_fork(st_k, &a); }"
        );
        let missing = KernelCall::new("st_k", vec![("b", Arg::input(1))]);
        assert_eq!(
            kernel_call(&missing, &p).unwrap_err().0,
            "missing required input 1"
        );
        let missing = KernelCall::new("st_k", vec![("y", Arg::output(3))]);
        assert_eq!(
            kernel_call(&missing, &p).unwrap_err().0,
            "missing required output 3"
        );
    }
}
