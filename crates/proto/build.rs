//! Compiles `proto/ringstore/v1/*.proto` with protox (pure Rust, no system
//! `protoc`) and generates the tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not with `env!`: a build script compiled in one
    // checkout and reused from a copied target directory (whose hashes do
    // not depend on the checkout's path) would read that checkout's protos.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "admin",
        "client",
        "common",
        "internode",
        "repair",
        "schema",
        "topology",
    ]
    .map(|name| root.join(format!("ringstore/v1/{name}.proto")));
    let descriptors = protox::compile(&files, [&root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
