//! Compiles `proto/ringstore/v1/*.proto` with protox (pure Rust, no system
//! `protoc`) and generates the tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not baked in with `env!`: a build script compiled in
    // another checkout (a copied target directory) must still read this one's
    // protos.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
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
    // Every service encodes through `codec`: prost's, reserving a message's
    // length before encoding it.
    tonic_prost_build::configure()
        .codec_path("crate::codec::ReservingProstCodec")
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
