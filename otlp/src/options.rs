//! Where and how to send: the endpoint, the protocol, headers (a token) and TLS.

use std::path::PathBuf;
use std::time::Duration;

use crate::OtlpError;

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// OTLP/gRPC (the collector's port 4317).
    #[default]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (the collector's port 4318), posted to
    /// `/v1development/profiles` and `/v1/metrics` under the endpoint.
    HttpProtobuf,
}

impl Protocol {
    /// The name the command line and session.json use: `grpc` or `http/protobuf`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// The protocol named `grpc`, `http/protobuf` (or `http`), as OTEL_EXPORTER_OTLP_PROTOCOL
    /// spells them.
    pub fn parse(name: &str) -> Result<Protocol, OtlpError> {
        match name {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" | "http" => Ok(Protocol::HttpProtobuf),
            other => Err(OtlpError::Options(format!(
                "unknown OTLP protocol {other:?} (there is: grpc, http/protobuf)"
            ))),
        }
    }
}

/// Where and how an exporter sends.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpOptions {
    /// `http://host:port` or `https://host:port` (a bare `host:port` is taken as http).
    pub endpoint: String,
    /// gRPC or HTTP/protobuf.
    pub protocol: Protocol,
    /// Headers sent with every request (`authorization`, a tenant id…); their values are
    /// secrets: never printed, never written into the session.
    pub headers: Vec<(String, String)>,
    /// A PEM file of the certificate authorities to trust for `https` (besides the
    /// built-in web roots).
    pub ca_file: Option<PathBuf>,
    /// How long one request may take before it counts as failed.
    pub timeout: Duration,
    /// Batches waiting to be sent; when it is full a new batch is dropped and counted.
    pub queue: usize,
    /// Bytes the batches waiting to be sent may hold (both queues, with the batches being
    /// named, built and sent): a batch that does not fit is dropped and counted as one
    /// finding the queue full ([`QUEUE_BYTES`] by default).
    pub queue_bytes: u64,
    /// Bytes the stack definitions learnt over a run may hold (frames, stacks and thread
    /// names, kept so that every later request resolves): past it, the run's stacks are no
    /// longer sent, counted and said; rows and allocations go on ([`TABLE_BYTES`] by
    /// default).
    pub table_bytes: u64,
    /// Attempts per batch (the first and its retries, with doubling backoff).
    pub attempts: u32,
    /// The first retry's wait; each later one doubles it.
    pub backoff: Duration,
    /// How long the end of a run waits at most for allocation stacks still being named
    /// ([`crate::exporter::NAMING_WAIT`] by default).
    pub naming_wait: Duration,
}

impl std::fmt::Debug for OtlpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpOptions")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("headers", &self.header_names())
            .field("ca_file", &self.ca_file)
            .field("timeout", &self.timeout)
            .field("queue", &self.queue)
            .field("queue_bytes", &self.queue_bytes)
            .field("table_bytes", &self.table_bytes)
            .finish_non_exhaustive()
    }
}

/// The bytes the queued batches of a live export may hold by default: a minute of a
/// busy run's rows and stacks (a few kilobytes to a hundred each) fits many times over,
/// and a collector that never answers costs at most this.
pub const QUEUE_BYTES: u64 = 8 << 20;

/// The bytes the stack definitions of a live export may hold by default: some 150,000
/// distinct stacks of 100,000 frames, beyond the longest runs the project records.
pub const TABLE_BYTES: u64 = 16 << 20;

impl OtlpOptions {
    /// Options for `endpoint`, checked: the defaults for everything else.
    pub fn new(endpoint: &str, protocol: Protocol) -> Result<OtlpOptions, OtlpError> {
        let endpoint = normalize_endpoint(endpoint)?;
        Ok(OtlpOptions {
            endpoint,
            protocol,
            headers: Vec::new(),
            ca_file: None,
            timeout: Duration::from_secs(5),
            // A minute of 1 s intervals (two batches each: profiles and metrics) waits
            // for a collector that is restarting; more is dropped and counted.
            queue: 128,
            queue_bytes: QUEUE_BYTES,
            table_bytes: TABLE_BYTES,
            attempts: 3,
            backoff: Duration::from_millis(250),
            naming_wait: crate::exporter::NAMING_WAIT,
        })
    }

    /// The header names, without their values (what the session records).
    pub fn header_names(&self) -> Vec<String> {
        self.headers.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Adds headers given as `key=value,key2=value2` (the form of
    /// `OTEL_EXPORTER_OTLP_HEADERS`; values may be percent-encoded).
    pub fn add_headers(&mut self, list: &str) -> Result<(), OtlpError> {
        self.headers.extend(parse_headers(list)?);
        Ok(())
    }

    /// Whether requests go over TLS.
    pub fn tls(&self) -> bool {
        self.endpoint.starts_with("https://")
    }
}

/// `http://` added to a bare `host:port`; anything but http and https refused; the
/// authority checked ([`check_authority`]); a trailing `/` dropped.
fn normalize_endpoint(endpoint: &str) -> Result<String, OtlpError> {
    let endpoint = endpoint.trim();
    if endpoint.is_empty() {
        return Err(OtlpError::Options("the OTLP endpoint is empty".into()));
    }
    let full = if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("http://{endpoint}")
    };
    let rest = full
        .strip_prefix("http://")
        .or_else(|| full.strip_prefix("https://"))
        .ok_or_else(|| {
            OtlpError::Options(format!(
                "OTLP endpoint {endpoint:?}: only http:// and https:// are spoken"
            ))
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    check_authority(authority)
        .map_err(|why| OtlpError::Options(format!("OTLP endpoint {endpoint:?}: {why}")))?;
    let path = &rest[authority.len()..];
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(OtlpError::Options(format!(
            "OTLP endpoint {endpoint:?}: its path holds a space or a control character"
        )));
    }
    Ok(full.trim_end_matches('/').to_owned())
}

/// An endpoint's `host[:port]`: a name (letters, digits, `-`, `.`, `_`), an IPv4 address
/// or an IPv6 address in brackets, and a port from 1 to 65535 when one is given.
/// Credentials (`user@`) are refused: they would not be sent, a header carries them.
fn check_authority(authority: &str) -> Result<(), String> {
    if authority.is_empty() {
        return Err("names no host".into());
    }
    if authority.contains('@') {
        return Err(
            "credentials in the endpoint are not sent; give them as a header \
                    (--otlp-headers authorization=…)"
                .into(),
        );
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((address, after)) = bracketed.split_once(']') else {
            return Err("an IPv6 address opened with `[` is not closed with `]`".into());
        };
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("[{address}] is not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("{after:?} after the IPv6 address is not `:PORT`"))?,
            ),
        };
        (None, port)
    } else if authority.matches(':').count() > 1 {
        return Err(format!(
            "{authority:?}: an IPv6 address goes in brackets ([::1]:4317)"
        ));
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(authority), None),
        }
    };
    if let Some(host) = host {
        let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        if host.is_empty() {
            return Err("names no host".into());
        }
        if !host.chars().all(name_char) {
            return Err(format!(
                "host {host:?} is neither a name nor an address (an IPv6 address goes in \
                 brackets: [::1]:4317)"
            ));
        }
    }
    if let Some(port) = port {
        match port.parse::<u32>() {
            Ok(1..=65535) if port.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return Err(format!("port {port:?} is not a port (1 to 65535)")),
        }
    }
    Ok(())
}

/// The port an endpoint names, when it names one (`None` for the scheme's default).
fn endpoint_port(endpoint: &str) -> Option<u16> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let after_host = match authority.rfind(']') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    after_host.rsplit_once(':')?.1.parse().ok()
}

/// The protocol the OTLP specification's ports imply: 4318 is OTLP/HTTP's, anything
/// else (4317 first) gRPC, the specification's default.
pub fn protocol_for_endpoint(endpoint: &str) -> Protocol {
    match endpoint_port(endpoint) {
        Some(4318) => Protocol::HttpProtobuf,
        _ => Protocol::Grpc,
    }
}

/// `key=value` pairs separated by commas; keys are lowercased (HTTP/2 and gRPC metadata
/// want them so), values percent-decoded.
pub fn parse_headers(list: &str) -> Result<Vec<(String, String)>, OtlpError> {
    let mut out = Vec::new();
    for pair in list.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(OtlpError::Options(format!(
                "OTLP header {:?} is not key=value",
                redact_pair(pair)
            )));
        };
        let key = key.trim().to_ascii_lowercase();
        let valid_key = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid_key {
            return Err(OtlpError::Options(format!(
                "OTLP header name {key:?} is not a header name"
            )));
        }
        let value = percent_decode(value.trim());
        if value.chars().any(char::is_control) {
            return Err(OtlpError::Options(format!(
                "OTLP header {key}: its value holds a control character"
            )));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `key=value,…` with every value replaced by `<redacted>` (what a command line keeps).
pub fn redact_headers(list: &str) -> String {
    list.split(',')
        .map(redact_pair)
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((key, _)) => format!("{key}=<redacted>"),
        None => "<redacted>".to_owned(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_host_and_port_is_taken_as_http() {
        let o = OtlpOptions::new("127.0.0.1:4317", Protocol::Grpc).expect("valid");
        assert_eq!(o.endpoint, "http://127.0.0.1:4317");
        assert!(!o.tls());
        let o =
            OtlpOptions::new("https://otel.example:4318/", Protocol::HttpProtobuf).expect("valid");
        assert_eq!(o.endpoint, "https://otel.example:4318");
        assert!(o.tls());
    }

    #[test]
    fn malformed_authorities_are_refused_naming_what_is_wrong() {
        for (endpoint, words) in [
            ("127.0.0.1:99999", "port \"99999\""),
            ("127.0.0.1:0", "port \"0\""),
            ("http://host:", "port \"\""),
            ("http://host:+80", "port \"+80\""),
            ("http://[::1", "not closed"),
            ("http://[::g]:4317", "not an IPv6 address"),
            ("http://[::1]x", "is not `:PORT`"),
            ("http://::1:4317", "in brackets"),
            ("http://user:pw@host:4317", "credentials"),
            ("http://ho st:4317", "neither a name"),
            ("http://:4317", "names no host"),
            ("http://host:4317/v 1", "its path"),
        ] {
            let e = OtlpOptions::new(endpoint, Protocol::Grpc)
                .expect_err(endpoint)
                .to_string();
            assert!(e.contains(words), "{endpoint}: {e}");
        }
        for endpoint in [
            "http://[::1]:4317",
            "http://[::1]",
            "https://otel-collector.example.com",
            "localhost:1",
            "otel_1.internal:65535/prefix",
        ] {
            assert!(
                OtlpOptions::new(endpoint, Protocol::Grpc).is_ok(),
                "{endpoint}"
            );
        }
    }

    #[test]
    fn the_specifications_ports_choose_the_default_protocol() {
        assert_eq!(
            protocol_for_endpoint("http://h:4318"),
            Protocol::HttpProtobuf
        );
        assert_eq!(
            protocol_for_endpoint("http://[::1]:4318/"),
            Protocol::HttpProtobuf
        );
        assert_eq!(protocol_for_endpoint("http://h:4317"), Protocol::Grpc);
        assert_eq!(protocol_for_endpoint("https://h"), Protocol::Grpc);
        assert_eq!(protocol_for_endpoint("http://h:14318"), Protocol::Grpc);
    }

    #[test]
    fn other_schemes_and_empty_hosts_are_refused() {
        assert!(OtlpOptions::new("unix:///run/otel.sock", Protocol::Grpc).is_err());
        assert!(OtlpOptions::new("http://", Protocol::Grpc).is_err());
        assert!(OtlpOptions::new("  ", Protocol::Grpc).is_err());
    }

    #[test]
    fn headers_parse_as_the_otel_environment_variable_spells_them() {
        let h =
            parse_headers("Authorization=Bearer%20s3cret, x-scope-orgid=tenant-1").expect("valid");
        assert_eq!(
            h,
            vec![
                ("authorization".into(), "Bearer s3cret".into()),
                ("x-scope-orgid".into(), "tenant-1".into())
            ]
        );
        let e = parse_headers("token s3cret").expect_err("no =");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(parse_headers("bad key=v").is_err());
    }

    #[test]
    fn redaction_keeps_names_and_drops_values() {
        assert_eq!(
            redact_headers("authorization=Bearer s3cret,x-tenant=a"),
            "authorization=<redacted>,x-tenant=<redacted>"
        );
        let mut o = OtlpOptions::new("localhost:4317", Protocol::Grpc).expect("valid");
        o.add_headers("authorization=s3cret").expect("valid");
        assert!(!format!("{o:?}").contains("s3cret"));
    }
}
