//! Storage: durable cells in token order. (Design notes to be completed with the engines.)

#![deny(missing_docs)]

mod cell;
mod error;

pub use cell::{Cell, Timestamp};
pub use error::{Result, StorageError};
