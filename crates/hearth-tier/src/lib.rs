//! Hybrid fast/slow storage (sans-I/O): a discrete-event simulator of an OS
//! cache, a prefetch cache, a small fast device and a large slow one
//! ([`sim`]); partition plans that place on the fast device what a training
//! trace's long-range history says matters ([`graph`], [`plan`]); and
//! correlation-directed prefetching along the access graph
//! ([`sim::CdpConfig`]).

pub mod devices;
mod error;
pub mod events;
pub mod experiment;
pub mod extent;
pub mod graph;
pub mod plan;
pub mod sim;
pub mod synth;

pub use error::TierError;
pub use experiment::{Experiment, Scheme};
pub use extent::{extents, footprint_blocks, Extent};
pub use graph::{partition, AccessGraph, Partitioner};
pub use sim::{simulate, CdpConfig, FastUse, TierConfig, TierStats};
