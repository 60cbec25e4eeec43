//! Deterministic simulation of whole ringstore clusters (work in progress).

#![deny(missing_docs)]

pub mod client;
pub mod cluster;
pub mod entropy;
pub mod faults;
pub mod net;
pub mod scenario;
pub mod time;
pub mod verdict;
pub mod workload;
