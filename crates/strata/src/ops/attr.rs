//! A node's attributes as the ops read them, independent of the file format
//! they came from: the importer (`onnx`) converts each node's attributes
//! into [`Attribute`]s, and the op parsers read them through [`Attrs`].

use crate::op_err;
use crate::tensor::Tensor;

use super::OpError;

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    String(String),
    Tensor(Tensor),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Strings(Vec<String>),
    /// A kind no op reads (a graph, a sparse tensor, a type): present, without a value.
    Other,
}

/// A named attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub value: Attr,
}

impl Attribute {
    pub fn new(name: &str, value: Attr) -> Attribute {
        Attribute {
            name: name.to_string(),
            value,
        }
    }
}

/// A node's attributes, with typed getters. A getter reads its own kind,
/// plus these leniencies: a single INT where INTS is expected (the peer's
/// `Squeeze` axes, even at opset 13+) reads as a one-element list, a single
/// FLOAT where FLOATS is expected likewise, and an INT where a FLOAT is
/// expected reads as that number. An attribute of any other kind reads as
/// absent.
pub struct Attrs<'a> {
    pub list: &'a [Attribute],
    /// The opset version of the node's domain (`i64::MAX` when unknown: newest semantics).
    pub opset: i64,
}

impl<'a> Attrs<'a> {
    pub fn new(list: &'a [Attribute]) -> Self {
        Attrs {
            list,
            opset: i64::MAX,
        }
    }
    pub fn with_opset(list: &'a [Attribute], opset: i64) -> Self {
        Attrs { list, opset }
    }
    /// The first attribute of that name.
    pub fn get(&self, name: &str) -> Option<&'a Attr> {
        self.list.iter().find(|a| a.name == name).map(|a| &a.value)
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn int_or(&self, name: &str, default: i64) -> i64 {
        self.int(name).unwrap_or(default)
    }
    pub fn float(&self, name: &str) -> Option<f32> {
        match self.get(name)? {
            Attr::Float(f) => Some(*f),
            Attr::Int(i) => Some(*i as f32),
            _ => None,
        }
    }
    pub fn float_or(&self, name: &str, default: f32) -> f32 {
        self.float(name).unwrap_or(default)
    }
    /// A list of ints; a single INT reads as a one-element list.
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.get(name)? {
            Attr::Ints(v) => Some(v.clone()),
            Attr::Int(i) => Some(vec![*i]),
            _ => None,
        }
    }
    /// A list of floats; a single FLOAT reads as a one-element list.
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        match self.get(name)? {
            Attr::Floats(v) => Some(v.clone()),
            Attr::Float(f) => Some(vec![*f]),
            _ => None,
        }
    }
    pub fn string(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Attr::String(s) => Some(s.clone()),
            _ => None,
        }
    }
    pub fn string_or(&self, name: &str, default: &str) -> String {
        self.string(name).unwrap_or_else(|| default.to_string())
    }
    pub fn tensor(&self, name: &str) -> Option<&'a Tensor> {
        match self.get(name)? {
            Attr::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// Reject an attribute value the op does not implement.
    pub fn reject_if(&self, cond: bool, what: &str) -> Result<(), OpError> {
        if cond {
            Err(op_err!("unsupported: {what}"))
        } else {
            Ok(())
        }
    }
}
