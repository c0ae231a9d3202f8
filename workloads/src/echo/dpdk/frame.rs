//! Ethernet II / IPv4 / UDP frames as a NIC would see them: built with both checksums
//! (the IPv4 header's and UDP's over its pseudo-header, RFC 768 and RFC 1071), and parsed
//! with every length and both checksums checked. Pure byte work, with no DPDK in it.

use std::net::Ipv4Addr;

/// Bytes of the Ethernet (14), IPv4 (20, no options) and UDP (8) headers.
pub(crate) const HEADERS: usize = 14 + 20 + 8;
/// The largest IPv4 packet of a frame: Ethernet's 1,500-byte MTU.
pub(crate) const MTU: usize = 1500;
/// The most UDP payload bytes a frame carries (no IP fragmentation).
pub(crate) const MAX_UDP_PAYLOAD: usize = MTU - 20 - 8;

const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_UDP: u8 = 17;
const TTL: u8 = 64;

/// One end of the echo: its MAC address, IPv4 address and UDP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) mac: [u8; 6],
    pub(crate) ip: Ipv4Addr,
    pub(crate) port: u16,
}

/// What is wrong with a frame that is not a well-formed UDP/IPv4 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Shorter than its headers, or than the lengths they give.
    Truncated,
    /// Not IPv4 (another EtherType), or IPv4 with options or another version.
    NotIpv4,
    /// IPv4, but not UDP.
    NotUdp,
    /// A fragment: the echo never fragments.
    Fragment,
    /// The IPv4 header's checksum does not add up.
    IpChecksum,
    /// The UDP checksum does not add up (or is absent).
    UdpChecksum,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::Truncated => "truncated frame",
            Fault::NotIpv4 => "not an option-less IPv4 packet",
            Fault::NotUdp => "not UDP",
            Fault::Fragment => "an IPv4 fragment",
            Fault::IpChecksum => "bad IPv4 header checksum",
            Fault::UdpChecksum => "bad or missing UDP checksum",
        })
    }
}

/// A frame that parsed: its two ends and the UDP payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Datagram<'a> {
    pub(crate) src: Endpoint,
    pub(crate) dst: Endpoint,
    pub(crate) payload: &'a [u8],
}

/// The one's-complement sum of `bytes` as 16-bit big-endian words, added to `sum`
/// (RFC 1071; an odd last byte is padded with zero).
fn add_words(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The UDP checksum field for `udp` (header and payload, its checksum field zero or
/// not: the sum is taken as is) between `src` and `dst`.
fn udp_sum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    let mut sum = add_words(0, &src.octets());
    sum = add_words(sum, &dst.octets());
    sum += u32::from(PROTO_UDP) + udp.len() as u32;
    fold(add_words(sum, udp))
}

/// Writes the headers of a frame from `src` to `dst` before the `payload_len` bytes of
/// UDP payload already at `out[HEADERS..]`, checksums included; returns the frame's
/// length. `id` is the IPv4 identification. `out` must hold the frame and the payload
/// must fit in [`MAX_UDP_PAYLOAD`].
pub(crate) fn write(
    out: &mut [u8],
    src: &Endpoint,
    dst: &Endpoint,
    payload_len: usize,
    id: u16,
) -> usize {
    debug_assert!(payload_len <= MAX_UDP_PAYLOAD);
    let len = HEADERS + payload_len;
    let (eth, rest) = out[..len].split_at_mut(14);
    eth[..6].copy_from_slice(&dst.mac);
    eth[6..12].copy_from_slice(&src.mac);
    eth[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let (ip, udp) = rest.split_at_mut(20);
    let ip_len = (20 + 8 + payload_len) as u16;
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    // Don't fragment, offset 0.
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = TTL;
    ip[9] = PROTO_UDP;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&src.ip.octets());
    ip[16..20].copy_from_slice(&dst.ip.octets());
    let ip_sum = !fold(add_words(0, ip));
    ip[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    udp[..2].copy_from_slice(&src.port.to_be_bytes());
    udp[2..4].copy_from_slice(&dst.port.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    udp[6..8].fill(0);
    let mut sum = !udp_sum(src.ip, dst.ip, udp);
    // A computed zero goes on the wire as all ones (zero means "no checksum").
    if sum == 0 {
        sum = 0xffff;
    }
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
    len
}

/// Parses `frame` as an Ethernet II frame holding an option-less, unfragmented IPv4
/// packet holding a UDP datagram, checking every length and both checksums. Bytes past
/// the IPv4 packet (Ethernet padding) are ignored.
pub(crate) fn parse(frame: &[u8]) -> Result<Datagram<'_>, Fault> {
    if frame.len() < HEADERS {
        return Err(Fault::Truncated);
    }
    let mac = |at: usize| -> [u8; 6] {
        let mut m = [0; 6];
        m.copy_from_slice(&frame[at..at + 6]);
        m
    };
    if u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 || frame[14] != 0x45 {
        return Err(Fault::NotIpv4);
    }
    let ip = &frame[14..34];
    if ip[9] != PROTO_UDP {
        return Err(Fault::NotUdp);
    }
    let ip_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip_len < 28 || 14 + ip_len > frame.len() {
        return Err(Fault::Truncated);
    }
    // More fragments, or an offset: a fragment.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(Fault::Fragment);
    }
    if fold(add_words(0, ip)) != 0xffff {
        return Err(Fault::IpChecksum);
    }
    let src_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let udp = &frame[34..14 + ip_len];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 || udp_len > udp.len() {
        return Err(Fault::Truncated);
    }
    let udp = &udp[..udp_len];
    if udp[6..8] == [0, 0] || udp_sum(src_ip, dst_ip, udp) != 0xffff {
        return Err(Fault::UdpChecksum);
    }
    Ok(Datagram {
        src: Endpoint {
            mac: mac(6),
            ip: src_ip,
            port: u16::from_be_bytes([udp[0], udp[1]]),
        },
        dst: Endpoint {
            mac: mac(0),
            ip: dst_ip,
            port: u16::from_be_bytes([udp[2], udp[3]]),
        },
        payload: &udp[8..],
    })
}

/// Turns a parsed frame around in place, as an echo server answers: the MAC addresses,
/// IPv4 addresses and UDP ports of its two ends swap. Both checksums stay right (a
/// one's-complement sum does not depend on the order of its words), so nothing is
/// recomputed.
pub(crate) fn turn_around(frame: &mut [u8]) {
    if frame.len() < HEADERS {
        return;
    }
    for i in 0..6 {
        frame.swap(i, 6 + i);
    }
    for i in 0..4 {
        frame.swap(26 + i, 30 + i);
    }
    for i in 0..2 {
        frame.swap(34 + i, 36 + i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends() -> (Endpoint, Endpoint) {
        (
            Endpoint {
                mac: [0x02, 0, 0, 0, 0, 0x02],
                ip: Ipv4Addr::new(10, 77, 0, 2),
                port: 49152,
            },
            Endpoint {
                mac: [0x02, 0, 0, 0, 0, 0x01],
                ip: Ipv4Addr::new(10, 77, 0, 1),
                port: 7777,
            },
        )
    }

    fn built(payload: &[u8]) -> Vec<u8> {
        let (client, server) = ends();
        let mut out = vec![0; HEADERS + payload.len()];
        out[HEADERS..].copy_from_slice(payload);
        let n = write(&mut out, &client, &server, payload.len(), 7);
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn the_ipv4_header_checksum_matches_a_worked_example() {
        // The header of the Wikipedia "IPv4 header checksum" example: sum 0xb861.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(!fold(add_words(0, &header)), 0xb861);
    }

    #[test]
    fn a_built_frame_parses_back_with_its_ends_and_payload() {
        let payload: Vec<u8> = (0..64u8).collect();
        let frame = built(&payload);
        let (client, server) = ends();
        let d = parse(&frame).unwrap();
        assert_eq!(d.src, client);
        assert_eq!(d.dst, server);
        assert_eq!(d.payload, &payload[..]);
    }

    #[test]
    fn an_odd_payload_and_ethernet_padding_parse() {
        let mut frame = built(&[1, 2, 3]);
        frame.extend_from_slice(&[0; 15]);
        assert_eq!(parse(&frame).unwrap().payload, &[1, 2, 3]);
    }

    #[test]
    fn a_flipped_bit_anywhere_in_ip_or_udp_is_caught() {
        let frame = built(&[0x5a; 64]);
        for at in 14..frame.len() {
            // The ones that change a length or a type are named otherwise; none passes.
            let mut bad = frame.clone();
            bad[at] ^= 0x10;
            assert!(parse(&bad).is_err(), "byte {at} flipped passed");
        }
    }

    #[test]
    fn checksums_name_the_header_they_belong_to() {
        let frame = built(&[9; 20]);
        let mut bad_ip = frame.clone();
        bad_ip[24] ^= 1; // the IPv4 checksum itself
        assert_eq!(parse(&bad_ip), Err(Fault::IpChecksum));
        let mut bad_udp = frame.clone();
        bad_udp[HEADERS] ^= 1;
        assert_eq!(parse(&bad_udp), Err(Fault::UdpChecksum));
        let mut no_udp_sum = frame;
        no_udp_sum[40..42].fill(0);
        assert_eq!(parse(&no_udp_sum), Err(Fault::UdpChecksum));
    }

    #[test]
    fn other_traffic_and_short_frames_are_refused() {
        assert_eq!(parse(&[0; 10]), Err(Fault::Truncated));
        let mut arp = built(&[1; 8]);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(parse(&arp), Err(Fault::NotIpv4));
        let mut long = built(&[1; 8]);
        long.truncate(HEADERS + 4);
        assert_eq!(parse(&long), Err(Fault::Truncated));
    }

    #[test]
    fn a_turned_frame_goes_back_with_its_checksums_right() {
        let frame = built(&[0xa5; 64]);
        let mut echoed = frame.clone();
        turn_around(&mut echoed);
        let (client, server) = ends();
        let d = parse(&echoed).unwrap();
        assert_eq!((d.src, d.dst), (server, client));
        assert_eq!(d.payload, &frame[HEADERS..]);
    }
}
