//! Compiles `proto/ringstore/v1/*.proto` with protox (pure Rust, no system
//! `protoc`) and generates the tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "admin",
        "client",
        "common",
        "internode",
        "repair",
        "schema",
        "topology",
        "users",
    ]
    .map(|name| root.join(format!("ringstore/v1/{name}.proto")));
    let descriptors = protox::compile(&files, [&root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
