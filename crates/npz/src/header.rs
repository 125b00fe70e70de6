//! The `.npy` header: a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
//!
//! NumPy writes it with `repr` and reads it with `ast.literal_eval`, so we
//! accept the small part of Python literal syntax that can appear there
//! (strings, `True`/`False`/`None`, integers, tuples, lists, nested dicts) and
//! reject everything else with a message naming what was found.

use std::collections::BTreeMap;

/// A parsed Python literal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Bool(bool),
    None,
    Int(i128),
    /// Tuples and lists; the header never needs to tell them apart.
    Seq(Vec<Value>),
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// How the value reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Value::Str(s) => format!("'{s}'"),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::None => "None".into(),
            Value::Int(i) => i.to_string(),
            Value::Seq(items) => {
                let inner: Vec<String> = items.iter().map(Value::describe).collect();
                format!("({})", inner.join(", "))
            }
            Value::Dict(_) => "a dict".into(),
        }
    }
}

/// Parses the header text into its top-level key → value map.
pub(crate) fn parse_dict(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.chars.len() {
        return Err(format!(
            "unexpected text after the header dict at character {}: {:?}",
            p.pos,
            p.rest_preview()
        ));
    }
    let Value::Dict(pairs) = value else {
        return Err(format!("header is not a dict but {}", value.describe()));
    };
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        let Value::Str(k) = k else {
            return Err(format!("header dict key {} is not a string", k.describe()));
        };
        if map.insert(k.clone(), v).is_some() {
            return Err(format!("header dict has key '{k}' twice"));
        }
    }
    Ok(map)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

/// Nesting deeper than this is not a NumPy header; the limit keeps garbage
/// input from exhausting the stack.
const MAX_DEPTH: usize = 32;

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn rest_preview(&self) -> String {
        self.chars[self.pos.min(self.chars.len())..]
            .iter()
            .take(20)
            .collect()
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        self.skip_ws();
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            Some(found) => Err(format!(
                "expected '{c}' at character {}, found '{found}'",
                self.pos
            )),
            None => Err(format!("expected '{c}', found the end of the header")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err("header nests too deeply".into());
        }
        self.skip_ws();
        match self.peek() {
            None => Err("expected a value, found the end of the header".into()),
            Some('\'') | Some('"') => self.string().map(Value::Str),
            Some('(') => self.seq('(', ')', depth).map(Value::Seq),
            Some('[') => self.seq('[', ']', depth).map(Value::Seq),
            Some('{') => self.dict(depth),
            Some(c) if c == '-' || c == '+' || c.is_ascii_digit() => self.int(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                match word.as_str() {
                    "True" => Ok(Value::Bool(true)),
                    "False" => Ok(Value::Bool(false)),
                    "None" => Ok(Value::None),
                    _ => Err(format!("unexpected name `{word}` in the header")),
                }
            }
            Some(c) => Err(format!(
                "unexpected character '{c}' at character {} in the header",
                self.pos
            )),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.peek().ok_or("expected a string")?;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err("unterminated string in the header".into()),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c @ ('\\' | '\'' | '"')) => out.push(c),
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some(c) => {
                            return Err(format!("unsupported escape '\\{c}' in a header string"))
                        }
                        None => return Err("unterminated string in the header".into()),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn int(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let negative = match self.peek() {
            Some('-') => {
                self.pos += 1;
                true
            }
            Some('+') => {
                self.pos += 1;
                false
            }
            _ => false,
        };
        let mut value: i128 = 0;
        let mut digits = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(i128::from(d)))
                .ok_or("integer in the header is too large")?;
            digits += 1;
            self.pos += 1;
        }
        if digits == 0 {
            let text: String = self.chars[start..self.pos].iter().collect();
            return Err(format!("expected an integer, found `{text}`"));
        }
        // Python 2 era files may spell long integers with an `L` suffix.
        if matches!(self.peek(), Some('L') | Some('l')) {
            self.pos += 1;
        }
        Ok(Value::Int(if negative { -value } else { value }))
    }

    /// Comma-separated values up to `close`; a trailing comma is allowed.
    fn seq(&mut self, open: char, close: char, depth: usize) -> Result<Vec<Value>, String> {
        self.expect(open)?;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(c) if c == close => {}
                Some(c) => {
                    return Err(format!(
                        "expected ',' or '{close}' at character {}, found '{c}'",
                        self.pos
                    ))
                }
                None => return Err(format!("expected '{close}', found the end of the header")),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, String> {
        self.expect('{')?;
        let mut pairs = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some('}') {
                self.pos += 1;
                return Ok(Value::Dict(pairs));
            }
            let key = self.value(depth + 1)?;
            self.expect(':')?;
            let value = self.value(depth + 1)?;
            pairs.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {}
                Some(c) => {
                    return Err(format!(
                        "expected ',' or '}}' at character {}, found '{c}'",
                        self.pos
                    ))
                }
                None => return Err("expected '}', found the end of the header".into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpy_header() {
        let m =
            parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n").unwrap();
        assert_eq!(m["descr"], Value::Str("<f4".into()));
        assert_eq!(m["fortran_order"], Value::Bool(false));
        assert_eq!(m["shape"], Value::Seq(vec![Value::Int(2), Value::Int(3)]));
    }

    #[test]
    fn parses_scalar_and_one_d_shapes() {
        let m = parse_dict("{\"shape\": (), 'b': (7,), 'c': [('x', '<f4')], 'd': 3L}").unwrap();
        assert_eq!(m["shape"], Value::Seq(vec![]));
        assert_eq!(m["b"], Value::Seq(vec![Value::Int(7)]));
        assert_eq!(m["d"], Value::Int(3));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "{",
            "{'a' 1}",
            "{'a': foo}",
            "{'a': (1, 2}",
            "{'a': 1} x",
            "[1, 2]",
            "{'a': 99999999999999999999999999999999999999999999}",
            &"(".repeat(100),
        ] {
            assert!(parse_dict(bad).is_err(), "accepted {bad:?}");
        }
    }
}
