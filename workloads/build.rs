//! Compiles the kvstore workload's protocol buffers (proto/kvstore.proto) into Rust with
//! tonic's code generator, using the protoc binary vendored by `protoc-bin-vendored`: no
//! system protoc is needed. Without the `kvstore` feature there is nothing to compile.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "kvstore")]
    compile_kvstore_protos()?;
    Ok(())
}

#[cfg(feature = "kvstore")]
fn compile_kvstore_protos() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment now.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/kvstore.proto");
    tonic_prost_build::configure()
        // Byte fields as `bytes::Bytes`: decoded as slices of the received buffer and
        // encoded from shared slices, not copied into and out of a `Vec` of their own.
        .bytes(".")
        // Buffers sized for the messages (src/kvstore/codec.rs), not tonic's 8 KiB.
        .codec_path("crate::kvstore::codec::KvCodec")
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/kvstore.proto"], &["proto"])?;
    Ok(())
}
