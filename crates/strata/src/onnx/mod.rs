//! ONNX import: protobuf decoding (prost, generated code checked in) and
//! translation into the Graph IR through the op registry, with every node's
//! output types inferred and checked on the way.

#[allow(clippy::all, missing_docs)]
pub mod proto;

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

use crate::error::{Error, Result};
use crate::ir::{Graph, Node, NodeId, TensorId, TensorKind};
use crate::ops::{Attr, Attribute, Attrs, Registry};
use crate::tensor::{DType, Data, Tensor, TensorType};

/// The versions of the default domain (`ai.onnx`) whose meaning strata
/// implements for every op it supports; a model importing another is
/// refused at decode. Other domains (`com.microsoft`, strata's own) are
/// not checked: their ops have one version each.
///
/// - From 7 (ONNX 1.2): before it, Add, Sub, Mul, Div, Pow and Gemm
///   broadcast only when a `broadcast` attribute asks (Add and the others
///   the second operand along an `axis`), where strata implements the numpy
///   broadcasting of opset 7 on; and Reshape took its shape as an attribute
///   until 5. From 7 on, strata reads each op's form of every version: the
///   attribute forms of Slice (< 10), Pad (< 11), Squeeze, Unsqueeze,
///   ReduceSum and Split (< 13) and ReduceMean (< 18), and Softmax's 2-D
///   coercion (< 13, `Attrs::opset`).
/// - To 28, the newest released (ONNX 1.23). After 18 (ReduceMean's and
///   Pad's `axes` inputs, Split's `num_outputs`: implemented) the ops strata
///   implements changed only in the element types they admit, and in what
///   strata refuses anyway: Pad's `wrap` mode and AveragePool's `dilations`
///   (19), pool windows under `ceil_mode` (22); none changed in 26 to 28.
///   A later opset may change a meaning strata does not know of.
pub const AI_ONNX_OPSETS: std::ops::RangeInclusive<i64> = 7..=28;

/// A decoded model: its graph proto and opset versions by domain.
pub struct Model {
    pub proto: proto::ModelProto,
    pub opsets: BTreeMap<String, i64>,
}

/// Read and decode an ONNX file.
pub fn load(path: &Path) -> Result<Model> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes, path)
}

pub fn decode(bytes: &[u8], path: &Path) -> Result<Model> {
    let bad = |msg: String| Error::Decode {
        path: path.to_path_buf(),
        msg,
    };
    let proto = proto::ModelProto::decode(bytes)
        .map_err(|e| bad(format!("protobuf decoding failed: {e}")))?;
    if proto.ir_version <= 0 {
        return Err(bad(
            "no ir_version: the file is not an ONNX ModelProto".into()
        ));
    }
    if proto.graph.is_none() {
        return Err(bad("the model has no graph".into()));
    }
    let mut opsets = BTreeMap::new();
    for o in &proto.opset_import {
        let d = crate::ops::canonical_domain(&o.domain).to_string();
        // Some exporters repeat a domain; the highest version wins.
        let v = opsets.entry(d).or_insert(o.version);
        *v = (*v).max(o.version);
    }
    if let Some(&v) = opsets.get("") {
        if !AI_ONNX_OPSETS.contains(&v) {
            let (lo, hi) = (AI_ONNX_OPSETS.start(), AI_ONNX_OPSETS.end());
            let which = if v > *hi {
                "newer than any strata knows"
            } else {
                "older than strata implements"
            };
            return Err(Error::Usage(format!(
                "{}: the model imports ai.onnx opset {v}, {which}: strata implements ai.onnx opsets {lo} to {hi} (onnx.version_converter converts a model between them)",
                path.display()
            )));
        }
    }
    Ok(Model { proto, opsets })
}

/// Decode a TensorProto (initializer or attribute value).
pub fn tensor_from_proto(t: &proto::TensorProto) -> Result<Tensor, String> {
    let dtype = DType::from_onnx(t.data_type)
        .ok_or_else(|| format!("tensor `{}`: unsupported data type {}", t.name, t.data_type))?;
    if t.data_location == proto::tensor_proto::DataLocation::External as i32
        || !t.external_data.is_empty()
    {
        return Err(format!(
            "tensor `{}`: external data is not supported; save the model with its data inline",
            t.name
        ));
    }
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| format!("tensor `{}`: negative dimension {d}", t.name))
        })
        .collect::<Result<_, _>>()?;
    checked_size(&t.name, &shape, dtype)?;
    let n: usize = shape.iter().product();
    let ty = TensorType::new(dtype, shape.clone());
    if !t.raw_data.is_empty() {
        return Tensor::from_le_bytes(&ty, &t.raw_data).ok_or_else(|| {
            format!(
                "tensor `{}`: raw_data has {} bytes, {ty} needs {}",
                t.name,
                t.raw_data.len(),
                ty.bytes()
            )
        });
    }
    let data = match dtype {
        DType::F32 => Data::F32(t.float_data.clone()),
        DType::I64 => Data::I64(t.int64_data.clone()),
        DType::I32 => Data::I32(t.int32_data.clone()),
        DType::Bool => Data::Bool(t.int32_data.iter().map(|&x| x != 0).collect()),
    };
    let tensor = Tensor { shape, data };
    let got = match &tensor.data {
        Data::F32(v) => v.len(),
        Data::F64(v) => v.len(),
        Data::I64(v) => v.len(),
        Data::I32(v) => v.len(),
        Data::Bool(v) => v.len(),
    };
    if got != n {
        return Err(format!(
            "tensor `{}`: holds {got} values, {ty} needs {n}",
            t.name
        ));
    }
    Ok(tensor)
}

/// The static type of a graph input or output.
pub(crate) fn value_type(v: &proto::ValueInfoProto) -> Result<TensorType, String> {
    use proto::tensor_shape_proto::dimension::Value;
    use proto::type_proto::Value as TV;
    let tt = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(TV::TensorType(t)) => t,
        Some(TV::SequenceType(_)) => {
            return Err(format!(
            "`{}` is a sequence; strata needs tensors (lower sequence optimizers per parameter)",
            v.name
        ))
        }
        None => return Err(format!("`{}` has no tensor type", v.name)),
    };
    let dtype = DType::from_onnx(tt.elem_type)
        .ok_or_else(|| format!("`{}`: unsupported element type {}", v.name, tt.elem_type))?;
    // No shape at all is an unknown rank, not a scalar (a scalar declares an
    // empty shape).
    let dims = tt.shape.as_ref().map(|s| s.dim.as_slice()).ok_or_else(|| {
        format!(
            "`{}` declares no shape; strata needs static shapes (a scalar declares an empty one)",
            v.name
        )
    })?;
    let mut shape = Vec::new();
    for d in dims {
        match &d.value {
            Some(Value::DimValue(x)) if *x >= 0 => shape.push(*x as usize),
            Some(Value::DimParam(p)) => {
                return Err(format!(
                    "`{}` has the symbolic dimension `{p}`; strata needs static shapes",
                    v.name
                ))
            }
            _ => {
                return Err(format!(
                    "`{}` has an unknown dimension; strata needs static shapes",
                    v.name
                ))
            }
        }
    }
    checked_size(&v.name, &shape, dtype)?;
    Ok(TensorType::new(dtype, shape))
}

/// What a value info declares: the element type (`None` for UNDEFINED,
/// which the peer's transformer graphs write for most tensors) and the
/// shape, when every dimension is a number; `None` for partial or symbolic
/// shapes and element types strata does not know, which inference replaces.
fn declared_type(v: &proto::ValueInfoProto) -> Option<(Option<DType>, Vec<usize>)> {
    use proto::tensor_shape_proto::dimension::Value;
    use proto::type_proto::Value as TV;
    let Some(TV::TensorType(tt)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return None;
    };
    let dtype = match tt.elem_type {
        0 => None,
        code => Some(DType::from_onnx(code)?),
    };
    let shape = tt
        .shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| match d.value {
            Some(Value::DimValue(x)) if x >= 0 => Some(x as usize),
            _ => None,
        })
        .collect::<Option<Vec<usize>>>()?;
    Some((dtype, shape))
}

/// Reject shapes whose byte size overflows or exceeds anything a device holds.
fn checked_size(name: &str, shape: &[usize], dtype: DType) -> Result<usize, String> {
    const MAX_BYTES: usize = 1 << 40;
    // The dimensions other than 0 are held to the limit too: an empty
    // tensor of shape [0, 2^40, 2^40] has no bytes, but the ops multiply
    // its other dimensions (Gemm's rows by columns), which overflowed.
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    if nonzero.is_none_or(|b| b > MAX_BYTES) {
        let what = if shape.contains(&0) {
            ": its dimensions other than 0 span more than"
        } else {
            " is larger than"
        };
        return Err(format!(
            "`{name}` with shape {shape:?}{what} {MAX_BYTES} bytes"
        ));
    }
    Ok(shape.iter().product::<usize>() * dtype.size())
}

/// A node's attributes as the ops read them. Each keeps its declared
/// kind; an UNDEFINED one takes the kind of the field that is set (an INT
/// when none is). A TENSOR is decoded here, so a bad one is an error naming
/// the attribute.
pub fn attributes(list: &[proto::AttributeProto]) -> Result<Vec<Attribute>, String> {
    use proto::attribute_proto::AttributeType as T;
    let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
    list.iter()
        .map(|a| {
            let tensor = |t: &proto::TensorProto| {
                tensor_from_proto(t)
                    .map(Attr::Tensor)
                    .map_err(|e| format!("attribute `{}`: {e}", a.name))
            };
            // A kind this file format version does not define reads as one no op reads.
            let kind = T::try_from(a.r#type).unwrap_or(T::TypeProtos);
            let value = match kind {
                T::Int => Attr::Int(a.i),
                T::Float => Attr::Float(a.f),
                T::String => Attr::String(text(&a.s)),
                T::Tensor => match &a.t {
                    Some(t) => tensor(t)?,
                    None => Attr::Other,
                },
                T::Ints => Attr::Ints(a.ints.clone()),
                T::Floats => Attr::Floats(a.floats.clone()),
                T::Strings => Attr::Strings(a.strings.iter().map(|s| text(s)).collect()),
                T::Undefined if !a.floats.is_empty() => Attr::Floats(a.floats.clone()),
                T::Undefined if !a.ints.is_empty() => Attr::Ints(a.ints.clone()),
                T::Undefined if !a.strings.is_empty() => {
                    Attr::Strings(a.strings.iter().map(|s| text(s)).collect())
                }
                T::Undefined => match &a.t {
                    Some(t) => tensor(t)?,
                    None if !a.s.is_empty() => Attr::String(text(&a.s)),
                    None if a.f != 0.0 => Attr::Float(a.f),
                    None => Attr::Int(a.i),
                },
                _ => Attr::Other,
            };
            Ok(Attribute {
                name: a.name.clone(),
                value,
            })
        })
        .collect()
}

/// Fold a `Constant` node into a tensor.
fn constant_value(attrs: &[Attribute]) -> Result<Tensor, String> {
    let a = Attrs::new(attrs);
    if let Some(t) = a.tensor("value") {
        return Ok(t.clone());
    }
    if a.has("value_float") {
        return Ok(Tensor::f32(vec![], vec![a.float_or("value_float", 0.0)]));
    }
    if let Some(v) = a.floats("value_floats") {
        return Ok(Tensor::f32(vec![v.len()], v));
    }
    if let Some(v) = a.int("value_int") {
        return Ok(Tensor::i64(vec![], vec![v]));
    }
    if let Some(v) = a.ints("value_ints") {
        return Ok(Tensor::i64(vec![v.len()], v));
    }
    Err("Constant without a supported value attribute (value, value_float(s), value_int(s))".into())
}

/// How graph inputs are treated when importing into a graph.
pub enum Inputs {
    /// Create a new tensor per graph input.
    Create,
    /// Bind each graph input to the existing tensor of the same name (the optimizer
    /// graph of a training program reads the training graph's weights and accumulators).
    BindByName,
}

/// Import a model's graph into `g`, appending nodes. Returns the graph's outputs.
pub fn import_into(
    g: &mut Graph,
    model: &Model,
    reg: &Registry,
    inputs: Inputs,
) -> Result<Vec<TensorId>> {
    let gp = model.proto.graph.as_ref().expect("checked in decode");
    let gname = if gp.name.is_empty() {
        "main".to_string()
    } else {
        gp.name.clone()
    };
    let gerr = |msg: String| Error::Graph {
        graph: gname.clone(),
        msg,
    };

    let init_names: std::collections::BTreeSet<&str> =
        gp.initializer.iter().map(|t| t.name.as_str()).collect();
    for t in &gp.initializer {
        let v = tensor_from_proto(t).map_err(gerr)?;
        if g.find(&t.name).is_some() {
            return Err(gerr(format!("initializer `{}` is defined twice", t.name)));
        }
        let id = g.add_tensor(t.name.clone(), v.ty(), TensorKind::Constant);
        g.constants.insert(id, v);
    }
    for vi in &gp.input {
        if init_names.contains(vi.name.as_str()) {
            continue; // an input with a default value: strata treats it as the constant
        }
        let ty = value_type(vi).map_err(gerr)?;
        match inputs {
            Inputs::Create => {
                if g.find(&vi.name).is_some() {
                    return Err(gerr(format!("input `{}` is declared twice", vi.name)));
                }
                let id = g.add_tensor(vi.name.clone(), ty, TensorKind::Input);
                g.inputs.push(id);
            }
            Inputs::BindByName => {
                let id = g.find(&vi.name).ok_or_else(|| {
                    gerr(format!(
                        "input `{}` is not a tensor of the training graph",
                        vi.name
                    ))
                })?;
                if g.ty(id) != &ty {
                    return Err(gerr(format!(
                        "input `{}`: declared {ty}, the training graph has {}",
                        vi.name,
                        g.ty(id)
                    )));
                }
            }
        }
    }

    // What the graph declares for its node outputs (value_info and graph
    // outputs). Inference decides every type; a complete declaration that
    // disagrees is an error, so a graph is never run with a shape its
    // producer did not mean (e.g. a strided gradient whose input size the
    // op cannot see). In-place outputs are exempt: they are their input's
    // buffer whatever is declared (InPlaceAccumulatorV2's output is typed
    // as ORT's BOOL[1] "updated" flag in the fixtures).
    // An UNDEFINED element type declares the shape alone; a value info
    // with an empty name declares nothing.
    let declared: std::collections::HashMap<&str, (Option<DType>, Vec<usize>)> = gp
        .value_info
        .iter()
        .chain(&gp.output)
        .filter(|v| !v.name.is_empty())
        .filter_map(|v| Some((v.name.as_str(), declared_type(v)?)))
        .collect();
    // The declared shapes as types, for the ops that take an output's size
    // from its declaration (the element type is the op's own).
    let declared_ty: std::collections::HashMap<&str, TensorType> = declared
        .iter()
        .map(|(k, (d, s))| (*k, TensorType::new(d.unwrap_or(DType::F32), s.clone())))
        .collect();
    // Unit dimensions are not compared: the peer's kernel tests declare
    // scalar results (a mean loss, a full reduction) as `[1]`.
    let squeeze = |s: &[usize]| -> Vec<usize> { s.iter().copied().filter(|&d| d != 1).collect() };
    let check_declared = |out: &str, ty: &TensorType| -> std::result::Result<(), String> {
        match declared.get(out) {
            Some((d, s))
                if d.is_some_and(|d| d != ty.dtype) || squeeze(s) != squeeze(&ty.shape) =>
            {
                let what = match d {
                    Some(d) => TensorType::new(*d, s.clone()).to_string(),
                    None => format!("shape {s:?} (element type undefined)"),
                };
                Err(format!(
                    "output `{out}`: the graph declares {what}, the op's inputs give {ty}"
                ))
            }
            _ => Ok(()),
        }
    };

    for index in topo_order(&gp.node).map_err(gerr)? {
        let np = &gp.node[index];
        let name = node_name(np, index);
        let nerr = |msg: String| Error::Node {
            node: name.clone(),
            op_type: np.op_type.clone(),
            msg,
        };
        let attrs = attributes(&np.attribute).map_err(nerr)?;
        // The inputs up to the last one given, and which of them are given
        // (an empty name is an absent optional input), for the arity check.
        let given = present_inputs(&np.input);
        let is_given: Vec<bool> = given.iter().map(|i| !i.is_empty()).collect();
        if np.op_type == "Constant" && crate::ops::canonical_domain(&np.domain).is_empty() {
            crate::ops::Arity::exactly(0)
                .check("Constant", &is_given)
                .map_err(nerr)?;
            let v = constant_value(&attrs).map_err(nerr)?;
            let out = np
                .output
                .first()
                .ok_or_else(|| nerr("Constant without an output".into()))?;
            if g.find(out).is_some() {
                return Err(nerr(format!("output `{out}` is already defined")));
            }
            check_declared(out, &v.ty()).map_err(nerr)?;
            let id = g.add_tensor(out.clone(), v.ty(), TensorKind::Constant);
            g.constants.insert(id, v);
            continue;
        }
        let def = reg
            .lookup(&np.domain, &np.op_type)
            .ok_or_else(|| Error::UnknownOp {
                node: name.clone(),
                domain: if np.domain.is_empty() {
                    "ai.onnx".into()
                } else {
                    np.domain.clone()
                },
                op_type: np.op_type.clone(),
                known: reg
                    .names()
                    .map(|(_, o)| o.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let opset = model
            .opsets
            .get(crate::ops::canonical_domain(&np.domain))
            .copied()
            .unwrap_or(i64::MAX);
        def.arity.check(&np.op_type, &is_given).map_err(nerr)?;
        let op = (def.parse)(&Attrs::with_opset(&attrs, opset)).map_err(|e| nerr(e.0))?;
        let mut ins = Vec::with_capacity(given.len());
        for i in given {
            if i.is_empty() {
                ins.push(None);
            } else {
                let id = g.find(i).ok_or_else(|| {
                    nerr(format!(
                        "reads `{i}`, which no graph input, initializer or earlier node defines"
                    ))
                })?;
                ins.push(Some(id));
            }
        }
        let infer_in = g.op_inputs(&ins);
        let declared_out: Vec<Option<&TensorType>> = np
            .output
            .iter()
            .map(|o| declared_ty.get(o.as_str()))
            .collect();
        let types = op
            .infer_declared(&infer_in, np.output.len(), &declared_out)
            .map_err(|e| nerr(e.0))?;
        for (o, ty) in np.output.iter().zip(&types) {
            checked_size(o, &ty.shape, ty.dtype).map_err(nerr)?;
        }
        if let Some(values) = fold(g, &*op, &ins, &types, np.output.len()).map_err(nerr)? {
            for (o, v) in np.output.iter().zip(values) {
                if o.is_empty() {
                    continue;
                }
                if g.find(o).is_some() {
                    return Err(nerr(format!("output `{o}` is already defined")));
                }
                check_declared(o, &v.ty()).map_err(nerr)?;
                let id = g.add_tensor(o.clone(), v.ty(), TensorKind::Constant);
                g.constants.insert(id, v);
            }
            continue;
        }
        let node_id = NodeId(g.nodes.len() as u32);
        let mut outs = Vec::with_capacity(np.output.len());
        for (k, o) in np.output.iter().enumerate() {
            if o.is_empty() {
                outs.push(None);
                continue;
            }
            if g.find(o).is_some() {
                return Err(nerr(format!("output `{o}` is already defined")));
            }
            let ty = types.get(k).cloned().ok_or_else(|| {
                nerr(format!(
                    "has {} outputs; the op produces {}",
                    np.output.len(),
                    types.len()
                ))
            })?;
            let in_place = op
                .aliases()
                .iter()
                .any(|a| a.output == k && a.kind == crate::ops::AliasKind::InPlace);
            if !in_place {
                check_declared(o, &ty).map_err(nerr)?;
            }
            let id = g.add_tensor(o.clone(), ty, TensorKind::Value);
            g.tensors[id.idx()].producer = Some(node_id);
            outs.push(Some(id));
        }
        g.nodes.push(Node {
            name,
            domain: crate::ops::canonical_domain(&np.domain).to_string(),
            op_type: np.op_type.clone(),
            op: op.into(),
            inputs: ins,
            outputs: outs,
        });
    }

    let mut outputs = Vec::new();
    for o in &gp.output {
        let id = g
            .find(&o.name)
            .ok_or_else(|| gerr(format!("output `{}` is not produced by any node", o.name)))?;
        outputs.push(id);
    }
    Ok(outputs)
}

/// A node's inputs up to the last one given: the empty names after it are
/// absent inputs (ONNX), which neither count against the op's arity nor
/// reach the op.
fn present_inputs(names: &[String]) -> &[String] {
    let n = names
        .iter()
        .rposition(|i| !i.is_empty())
        .map_or(0, |p| p + 1);
    &names[..n]
}

/// A node's name for messages: its own, else `<op_type>_<position>`.
fn node_name(np: &proto::NodeProto, index: usize) -> String {
    if np.name.is_empty() {
        format!("{}_{index}", np.op_type)
    } else {
        np.name.clone()
    }
}

/// The order to import nodes in: a stable topological sort. The peer's
/// rewriter appends the nodes it fuses or inserts (Gemms built from
/// MatMul+Add, Reshapes around a Softmax) at the end of the node list, after
/// their consumers. Among the nodes whose inputs are all defined, the one
/// earliest in the file goes first, so a list that is already topological
/// keeps its order exactly. A tensor no node produces is left for the import
/// loop to report (graph input, initializer, or missing). Nodes on a cycle
/// are an error that names them and the tensors that close it.
fn topo_order(nodes: &[proto::NodeProto]) -> Result<Vec<usize>, String> {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, np) in nodes.iter().enumerate() {
        for o in np.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(o.as_str()).or_insert(i);
        }
    }
    // deps[i]: producers of node i's inputs, one entry per distinct producer.
    let deps: Vec<Vec<usize>> = nodes
        .iter()
        .map(|np| {
            let mut d: Vec<usize> = np
                .input
                .iter()
                .filter_map(|t| producer.get(t.as_str()).copied())
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut waiting: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            users[p].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() == nodes.len() {
        return Ok(order);
    }
    // Every node left waits on another node left: walk back along waiting
    // dependencies from the earliest one until a node repeats.
    let mut path = vec![(0..nodes.len()).find(|&i| waiting[i] > 0).unwrap()];
    loop {
        let cur = *path.last().unwrap();
        let next = deps[cur]
            .iter()
            .copied()
            .find(|&p| waiting[p] > 0)
            .expect("a waiting node waits on a waiting node");
        if let Some(at) = path.iter().position(|&p| p == next) {
            // path[at..] read backwards is the cycle in data-flow order.
            // Start it at its earliest node in the file, for a stable message.
            let mut cyc: Vec<usize> = path[at..].to_vec();
            cyc.reverse();
            let first = (0..cyc.len()).min_by_key(|&k| cyc[k]).unwrap();
            cyc.rotate_left(first);
            let mut steps = Vec::new();
            for (k, &n) in cyc.iter().enumerate() {
                let to = cyc[(k + 1) % cyc.len()];
                let via = nodes[n]
                    .output
                    .iter()
                    .find(|o| !o.is_empty() && nodes[to].input.contains(o))
                    .map(String::as_str)
                    .unwrap_or("?");
                steps.push(format!("`{}` --{via}-->", node_name(&nodes[n], n)));
            }
            steps.push(format!("`{}`", node_name(&nodes[cyc[0]], cyc[0])));
            let stuck = nodes.len() - order.len();
            return Err(format!(
                "the nodes form a cycle: {} ({stuck} node{} cannot be ordered)",
                steps.join(" "),
                if stuck == 1 { "" } else { "s" }
            ));
        }
        path.push(next);
    }
}

/// Import a single model as a stand-alone graph.
pub fn import(model: &Model, reg: &Registry) -> Result<Graph> {
    let mut g = Graph::default();
    g.outputs = import_into(&mut g, model, reg, Inputs::Create)?;
    crate::verify::verify(&g)?;
    Ok(g)
}

/// Constant folding at import: a node whose inputs are all compile-time
/// constants (shape arithmetic, `Shape` of a static tensor) becomes constants,
/// so shape and axes inputs downstream are known. Nodes that update state in
/// place are never folded.
fn fold(
    g: &Graph,
    op: &dyn crate::ops::Op,
    ins: &[Option<TensorId>],
    types: &[TensorType],
    n_out: usize,
) -> Result<Option<Vec<Tensor>>, String> {
    if op
        .aliases()
        .iter()
        .any(|a| a.kind == crate::ops::AliasKind::InPlace)
        || ins.iter().all(|i| i.is_none())
    {
        return Ok(None);
    }
    if let Some(shape) =
        op.static_value(&ins.iter().map(|i| i.map(|t| g.ty(t))).collect::<Vec<_>>())
    {
        return Ok(Some(vec![shape]));
    }
    if !ins.iter().flatten().all(|t| g.constants.contains_key(t)) {
        return Ok(None);
    }
    let vals: Vec<Option<&Tensor>> = ins.iter().map(|i| i.map(|t| &g.constants[&t])).collect();
    let out_types: Vec<Option<&TensorType>> = (0..n_out).map(|k| types.get(k)).collect();
    op.eval(&vals, &out_types).map(Some).map_err(|e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::attribute_proto::AttributeType as T;
    use proto::AttributeProto;

    fn attr(name: &str, ty: T, f: impl FnOnce(&mut AttributeProto)) -> AttributeProto {
        let mut a = AttributeProto {
            name: name.into(),
            r#type: ty as i32,
            ..Default::default()
        };
        f(&mut a);
        a
    }

    #[test]
    fn attributes_keep_their_kind_and_the_leniencies() {
        let list = [
            attr("axes", T::Int, |a| a.i = 1),
            attr("alpha", T::Int, |a| a.i = 2),
            attr("scales", T::Float, |a| a.f = 0.5),
            attr("mode", T::String, |a| a.s = b"tanh".to_vec()),
            attr("perm", T::Ints, |a| a.ints = vec![0, 2, 1]),
            attr("guess_ints", T::Undefined, |a| a.ints = vec![3]),
            attr("guess_float", T::Undefined, |a| a.f = 1.5),
            attr("guess_int", T::Undefined, |a| a.i = 7),
            attr("graph", T::Graph, |_| {}),
            attr("unknown", T::Undefined, |a| a.r#type = 99),
        ];
        let v = attributes(&list).unwrap();
        let a = Attrs::new(&v);
        assert_eq!(a.ints("axes"), Some(vec![1]), "a single INT reads as INTS");
        assert_eq!(a.int("axes"), Some(1));
        assert_eq!(a.float_or("alpha", 0.0), 2.0, "an INT reads as a FLOAT");
        assert_eq!(a.floats("scales"), Some(vec![0.5]));
        assert_eq!(a.string_or("mode", "none"), "tanh");
        assert_eq!(a.ints("perm"), Some(vec![0, 2, 1]));
        assert_eq!(a.int("perm"), None, "a list is no INT");
        assert_eq!(a.ints("guess_ints"), Some(vec![3]));
        assert_eq!(a.float_or("guess_float", 0.0), 1.5);
        assert_eq!(a.int("guess_int"), Some(7));
        assert!(a.has("graph") && a.int("graph").is_none());
        assert_eq!(a.get("unknown"), Some(&Attr::Other));
        assert!(!a.has("missing"));
    }

    #[test]
    fn a_bad_tensor_attribute_is_an_error_naming_it() {
        let bad = attr("value", T::Tensor, |a| {
            a.t = Some(proto::TensorProto {
                dims: vec![2],
                data_type: 1,
                float_data: vec![1.0],
                ..Default::default()
            })
        });
        let e = attributes(&[bad]).unwrap_err();
        assert!(e.contains("attribute `value`"), "{e}");
    }
}
