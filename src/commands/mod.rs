//! One module per subcommand, each with a `run` function.

pub mod token;
