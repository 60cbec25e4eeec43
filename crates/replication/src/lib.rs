//! Replication: consistency levels and the coordinator's bookkeeping. (Being written.)

#![deny(missing_docs)]
