//! The one access decision (`copyless_core::rights`) and every path
//! through it, checked against a plain reference model
//! (`reference.rs`) over generated scenes: the decision alone, fed the
//! same facts (`decision.rs`), and the whole core on a real filesystem,
//! acting as real Unix accounts (`kernel.rs`, with the scenes of
//! `scenes.rs`, which the real binary's test runs too).

mod decision;
mod descriptors;
mod generate;
mod kernel;
mod reference;
mod scenes;
