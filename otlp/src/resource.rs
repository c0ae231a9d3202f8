//! The resource every request carries: the host, the process, the workload and its
//! parameters, the session and benchtop, named by the OpenTelemetry semantic conventions
//! where one exists (`host.*`, `os.*`, `process.*`, `service.name`, `telemetry.sdk.*`) and
//! under `benchtop.` where none does.

use benchtop_sessions::SessionMeta;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// The instrumentation scope's name on every profile and metric.
pub const SCOPE: &str = "benchtop";

/// A string attribute.
pub(crate) fn string(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// An integer attribute.
pub(crate) fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// A workload parameter as an attribute value: numbers, booleans and strings as
/// themselves, anything else as its JSON text.
fn json_value(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Bool(b) => Value::BoolValue(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::IntValue(i),
            (None, Some(f)) => Value::DoubleValue(f),
            _ => Value::StringValue(n.to_string()),
        },
        serde_json::Value::String(s) => Value::StringValue(s.clone()),
        other => Value::StringValue(other.to_string()),
    }
}

/// The resource of a session's process `pid` (the worker, the command or the attached
/// process).
pub fn resource(meta: &SessionMeta, pid: Option<u32>) -> Resource {
    let mut attributes = vec![
        string("service.name", meta.workload.name.clone()),
        string("host.name", meta.host.hostname.clone()),
        string("host.arch", host_arch()),
        string("host.cpu.model.name", meta.host.cpu_model.clone()),
        string("os.type", "linux"),
        string("os.version", meta.host.kernel.clone()),
        string("telemetry.sdk.name", SCOPE),
        string("telemetry.sdk.language", "rust"),
        string("telemetry.sdk.version", meta.benchtop_version.clone()),
        string("benchtop.version", meta.benchtop_version.clone()),
        string("benchtop.session.id", meta.id.clone()),
        string("benchtop.session.name", meta.name.clone()),
        string("benchtop.workload.name", meta.workload.name.clone()),
    ];
    if let Some(pid) = pid.or(meta.worker.pid) {
        attributes.push(int("process.pid", i64::from(pid)));
    }
    for (name, value) in &meta.workload.params {
        attributes.push(KeyValue {
            key: format!("benchtop.workload.param.{name}"),
            value: Some(AnyValue {
                value: Some(json_value(value)),
            }),
            ..KeyValue::default()
        });
    }
    Resource {
        attributes,
        ..Resource::default()
    }
}

/// The scope every profile and metric is under.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    }
}

/// `host.arch` as the semantic conventions spell it.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}
