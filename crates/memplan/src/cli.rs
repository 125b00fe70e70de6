//! Helpers for command-line front ends (`strata plan`).

/// Flat result summary for `--json` output.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub buffers: usize,
    pub lower_bound: u64,
    pub peak: u64,
    pub optimal: bool,
    pub seconds: f64,
}

impl Summary {
    /// One-line JSON object with the fields above.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"buffers\":{},\"lower_bound\":{},\"peak\":{},\"optimal\":{},\"seconds\":{:.6}}}",
            self.buffers, self.lower_bound, self.peak, self.optimal, self.seconds
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json() {
        let s = super::Summary {
            buffers: 3,
            lower_bound: 10,
            peak: 12,
            optimal: false,
            seconds: 0.5,
        };
        assert_eq!(
            s.to_json(),
            r#"{"buffers":3,"lower_bound":10,"peak":12,"optimal":false,"seconds":0.500000}"#
        );
    }
}
