//! The defs workload's phases at full scale (3199.def's shape, 320,830 nodes): parsing
//! the text (on every CPU, and on one), and each checkpoint format's save (encode, write, fsync, rename) and reload
//! (read, decode), on a generated definition (seed 1). Freeing what a step returns is
//! left out of its time. Peak RSS is printed at the end (VmHWM of the bench process,
//! which holds the text and the tree throughout).
//!
//! `cargo bench -p benchtop-workloads --bench defs` (about 3 minutes on 2 cores);
//! `BENCHTOP_DEFS_SCALE=0.1` benches a smaller definition. The same phases, timed once
//! each with RSS per phase, come from the workload itself:
//! `benchtop run defs --profile none` (release build).

use std::hint::black_box;
use std::time::Duration;

use benchtop_workloads::defs::checkpoint::{self, Format};
use benchtop_workloads::defs::generate::generate;
use benchtop_workloads::defs::{parse, parse_serial, rss, write};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn scale() -> f64 {
    std::env::var("BENCHTOP_DEFS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn defs(c: &mut Criterion) {
    let text = write(&generate(scale(), 1));
    let defs = parse(&text).expect("generated text parses");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut group = c.benchmark_group("defs");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));

    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("parse", |b| {
        b.iter_with_large_drop(|| parse(black_box(&text)))
    });
    group.bench_function("parse-serial", |b| {
        b.iter_with_large_drop(|| parse_serial(black_box(&text)))
    });
    group.bench_function("write-text", |b| {
        b.iter_with_large_drop(|| write(black_box(&defs)))
    });

    for format in Format::ALL {
        let path = dir.path().join(format.file_name());
        let bytes = checkpoint::save(&defs, format, &path).expect("checkpoint written");
        group.throughput(Throughput::Bytes(bytes));
        group.bench_function(format!("checkpoint-{}", format.as_str()), |b| {
            b.iter(|| checkpoint::save(black_box(&defs), format, &path))
        });
        group.bench_function(format!("reload-{}", format.as_str()), |b| {
            b.iter_with_large_drop(|| checkpoint::load(&path, format))
        });
        eprintln!("checkpoint-{}: {bytes} bytes", format.as_str());
    }
    group.throughput(Throughput::Elements(defs.counts().nodes()));
    group.bench_function("clone", |b| {
        b.iter_with_large_drop(|| black_box(&defs).clone())
    });
    group.finish();

    let rss = rss();
    eprintln!(
        "text: {} bytes; peak RSS {} MiB",
        text.len(),
        rss.peak.unwrap_or(0) >> 20
    );
}

criterion_group!(benches, defs);
criterion_main!(benches);
