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
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/kvstore.proto"], &["proto"])?;
    Ok(())
}
