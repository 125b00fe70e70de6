//! placeholder, replaced by the memplan work
