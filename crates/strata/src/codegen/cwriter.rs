//! A small writer of C text: lines at the current indentation, blocks that
//! open with `{` and close with `}` one level deeper, comments. The emitter
//! says what the structure is; the writer owns the indentation.

/// One level of indentation.
pub const INDENT: &str = "    ";

#[derive(Default)]
pub struct CWriter {
    out: String,
    depth: usize,
}

impl CWriter {
    pub fn new() -> CWriter {
        CWriter::default()
    }

    /// One line at the current indentation (an empty line stays empty).
    pub fn line(&mut self, s: impl AsRef<str>) -> &mut Self {
        let s = s.as_ref();
        if !s.is_empty() {
            for _ in 0..self.depth {
                self.out.push_str(INDENT);
            }
            self.out.push_str(s);
        }
        self.out.push('\n');
        self
    }

    /// Several lines, each at the current indentation plus its own.
    pub fn lines<S: AsRef<str>>(&mut self, lines: impl IntoIterator<Item = S>) -> &mut Self {
        for l in lines {
            self.line(l);
        }
        self
    }

    pub fn blank(&mut self) -> &mut Self {
        self.out.push('\n');
        self
    }

    /// Text as it is, at no indentation (preformatted declarations).
    pub fn raw(&mut self, s: impl AsRef<str>) -> &mut Self {
        self.out.push_str(s.as_ref());
        self
    }

    /// `/* text */` on one line; a `*/` inside the text cannot end it early.
    pub fn comment(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.line(format!("/* {} */", text.as_ref().replace("*/", "* /")))
    }

    /// `head {`, then everything one level deeper until [`CWriter::close`].
    pub fn open(&mut self, head: impl AsRef<str>) -> &mut Self {
        self.line(format!("{} {{", head.as_ref()));
        self.depth += 1;
        self
    }

    /// `}` at the level of the matching [`CWriter::open`].
    pub fn close(&mut self) -> &mut Self {
        assert!(self.depth > 0, "CWriter::close without an open block");
        self.depth -= 1;
        self.line("}")
    }

    /// `head { ... }` with `body` written one level deeper.
    pub fn block(&mut self, head: impl AsRef<str>, body: impl FnOnce(&mut Self)) -> &mut Self {
        self.open(head);
        body(self);
        self.close()
    }

    /// The text; every block must be closed.
    pub fn finish(self) -> String {
        assert_eq!(self.depth, 0, "CWriter::finish with an open block");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_indent_and_close() {
        let mut w = CWriter::new();
        w.line("int x;").blank().block("void f(void)", |w| {
            w.comment("a */ b");
            w.open("for (int i = 0; i < 3; i++)");
            w.line("x += i;").line("");
            w.close();
        });
        assert_eq!(
            w.finish(),
            "int x;\n\nvoid f(void) {\n    /* a * / b */\n    for (int i = 0; i < 3; i++) {\n        x += i;\n\n    }\n}\n"
        );
    }

    #[test]
    #[should_panic(expected = "open block")]
    fn an_open_block_is_a_bug() {
        let mut w = CWriter::new();
        w.open("void f(void)");
        w.finish();
    }
}
