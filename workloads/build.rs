//! Compiles the kvstore workload's protocol buffers (proto/kvstore.proto) into Rust with
//! tonic's code generator, using the protoc binary vendored by `protoc-bin-vendored`: no
//! system protoc is needed. Without the `kvstore` feature there is nothing to compile.
//!
//! With the `dpdk` feature it also compiles csrc/dpdk_shim.c, the symbols for DPDK's
//! static-inline fast path, against the system's DPDK found through pkg-config (Debian:
//! `libdpdk-dev` and `pkg-config`), and links the workload to DPDK's libraries.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "kvstore")]
    compile_kvstore_protos()?;
    #[cfg(feature = "dpdk")]
    compile_dpdk_shim()?;
    Ok(())
}

#[cfg(feature = "dpdk")]
fn compile_dpdk_shim() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .map_err(|e| {
            format!(
                "the `dpdk` feature (udp-echo --backend dpdk) needs DPDK 22.11 or later and \
                 pkg-config: install them (Debian: apt-get install libdpdk-dev pkg-config), or \
                 build without the feature (--no-default-features, then --features kvstore).\n\
                 pkg-config said: {e}"
            )
        })?;
    let mut shim = cc::Build::new();
    shim.file("csrc/dpdk_shim.c")
        .includes(&dpdk.include_paths)
        // DPDK's headers use SSE4.2 intrinsics on x86, as DPDK itself is built.
        .flag_if_supported("-msse4.2")
        // Frame pointers in every build, as the Rust code keeps them
        // (.cargo/config.toml): a release build would omit them, and a frame-pointer walk
        // from a sample in a burst would skip its caller.
        .force_frame_pointer(true)
        .warnings(true);
    for (name, value) in &dpdk.defines {
        shim.define(name, value.as_deref());
    }
    shim.try_compile("benchtop_dpdk_shim")?;
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
