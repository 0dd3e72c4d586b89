//! What kind of address an IP is, for the egress proxy's refusal rule.
//!
//! The proxy refuses to dial anything but [`AddressClass::Public`]. An IPv6
//! address that embeds an IPv4 one is judged as that IPv4 address:
//! IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
//! (`64:ff9b::/96`, RFC 6052) and 6to4 (`2002:AABB:CCDD::/48`, RFC 3056),
//! so `[::ffff:169.254.169.254]` is the metadata service, not "some IPv6".
//! Ranges are from the IANA special-purpose registries (RFC 6890 and its
//! updates); metadata addresses from the cloud providers' documentation.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// The class of an address; everything but `Public` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressClass {
    Public,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7 (unique local), fec0::/10.
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT, RFC 6598).
    Cgnat,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// A cloud instance-metadata or host-agent endpoint.
    CloudMetadata,
    /// Documentation, benchmarking, protocol-assignment, reserved (240/4)
    /// and discard ranges: nothing legitimate lives there.
    Reserved,
    /// One of this machine's own interface addresses.
    ThisHost,
}

impl AddressClass {
    /// The kebab-case name used in events.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Unspecified => "unspecified",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Private => "private",
            AddressClass::Cgnat => "cgnat",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::CloudMetadata => "cloud-metadata",
            AddressClass::Reserved => "reserved",
            AddressClass::ThisHost => "this-host",
        }
    }
}

/// Metadata and host-agent endpoints. Several sit in ranges refused anyway
/// (link-local, CGNAT); they are listed so the event says *why*, and
/// 168.63.129.16 (Azure's WireServer) is in public space and would
/// otherwise pass.
const METADATA_V4: &[Ipv4Addr] = &[
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(169, 254, 170, 23),  // AWS EKS pod identity agent
    Ipv4Addr::new(169, 254, 0, 23),    // Tencent Cloud
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(168, 63, 129, 16),   // Azure WireServer
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud (classic)
];

/// The ranges of this machine's own addresses, gathered once per proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs(BTreeSet<IpAddr>);

impl LocalAddrs {
    /// From a fixed list (tests).
    pub fn from_list(addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        LocalAddrs(addrs.into_iter().map(canonical).collect())
    }

    /// The addresses of every interface of this host (getifaddrs). An
    /// error yields an empty set: the range checks still refuse loopback
    /// and private addresses, and only a host's *public* address would then
    /// slip through; the caller reports that.
    #[cfg(unix)]
    pub fn of_this_host() -> std::io::Result<Self> {
        let mut set = BTreeSet::new();
        for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
            let Some(addr) = ifa.address else { continue };
            if let Some(v4) = addr.as_sockaddr_in() {
                set.insert(IpAddr::V4(v4.ip()));
            } else if let Some(v6) = addr.as_sockaddr_in6() {
                set.insert(canonical(IpAddr::V6(v6.ip())));
            }
        }
        Ok(LocalAddrs(set))
    }

    /// Off unix there is no getifaddrs here: an empty set (see above).
    #[cfg(not(unix))]
    pub fn of_this_host() -> std::io::Result<Self> {
        Ok(LocalAddrs::default())
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The IPv4 address an IPv6 address stands for, if it embeds one.
pub fn embedded_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated; not
    // :: and ::1, which are IPv6's own unspecified and loopback).
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && (s[6] != 0 || s[7] > 1))) {
        return Some(tail);
    }
    // NAT64 well-known prefix 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// Judge embedded IPv4 as IPv4; everything else unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(&v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Classify an address. Only `Public` may be dialled.
pub fn classify(ip: IpAddr, local: &LocalAddrs) -> AddressClass {
    let ip = canonical(ip);
    let class = match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    };
    if class == AddressClass::Public && local.contains(ip) {
        return AddressClass::ThisHost;
    }
    class
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::*;
    if METADATA_V4.contains(&ip) {
        return CloudMetadata;
    }
    let table: &[([u8; 4], u32, AddressClass)] = &[
        ([0, 0, 0, 0], 8, Unspecified),
        ([127, 0, 0, 0], 8, Loopback),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([100, 64, 0, 0], 10, Cgnat),
        ([224, 0, 0, 0], 4, Multicast),
        ([255, 255, 255, 255], 32, Broadcast),
        ([240, 0, 0, 0], 4, Reserved),
        ([192, 0, 0, 0], 24, Reserved),    // IETF protocol assignments
        ([192, 0, 2, 0], 24, Reserved),    // TEST-NET-1
        ([198, 51, 100, 0], 24, Reserved), // TEST-NET-2
        ([203, 0, 113, 0], 24, Reserved),  // TEST-NET-3
        ([198, 18, 0, 0], 15, Reserved),   // benchmarking
        ([192, 88, 99, 0], 24, Reserved),  // deprecated 6to4 relay anycast
    ];
    table
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map_or(Public, |(_, _, c)| *c)
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    (u128::from(ip) & mask) == (u128::from(net) & mask)
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::*;
    let table: &[(Ipv6Addr, u32, AddressClass)] = &[
        (Ipv6Addr::UNSPECIFIED, 128, Unspecified),
        (Ipv6Addr::LOCALHOST, 128, Loopback),
        // AWS IMDS over IPv6 (fd00:ec2::254) and the rest of its /32.
        (
            Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0),
            32,
            CloudMetadata,
        ),
        (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, LinkLocal),
        (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, Private),
        (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, Private), // site-local (deprecated)
        (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, Multicast),
        (
            Ipv6Addr::new(0x2001, 0x0db8, 0, 0, 0, 0, 0, 0),
            32,
            Reserved,
        ), // documentation
        (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, Reserved), // documentation (RFC 9637)
        (Ipv6Addr::new(0x0100, 0, 0, 0, 0, 0, 0, 0), 64, Reserved), // discard
        (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, Reserved), // IETF protocol assignments, Teredo
        (
            Ipv6Addr::new(0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0),
            48,
            Reserved,
        ), // local-use NAT64
    ];
    table
        .iter()
        .find(|(net, bits, _)| in_v6(ip, *net, *bits))
        .map_or(Public, |(_, _, c)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressClass::*;

    fn c(s: &str) -> AddressClass {
        classify(s.parse().unwrap(), &LocalAddrs::default())
    }

    #[test]
    fn ipv4_ranges() {
        for (a, want) in [
            ("127.0.0.1", Loopback),
            ("127.255.1.2", Loopback),
            ("0.0.0.0", Unspecified),
            ("169.254.1.1", LinkLocal),
            ("10.2.3.4", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("172.32.0.1", Public),
            ("192.168.1.1", Private),
            ("100.64.0.1", Cgnat),
            ("100.127.255.255", Cgnat),
            ("100.128.0.1", Public),
            ("224.0.0.251", Multicast),
            ("239.255.255.250", Multicast),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
            ("192.0.2.7", Reserved),
            ("198.18.0.1", Reserved),
            ("8.8.8.8", Public),
            ("151.101.1.1", Public),
        ] {
            assert_eq!(c(a), want, "{a}");
        }
    }

    #[test]
    fn cloud_metadata_everywhere_it_hides() {
        for a in [
            "169.254.169.254",
            "169.254.170.2",
            "100.100.100.200",
            "168.63.129.16",
            "fd00:ec2::254",
            "fd00:ec2:1::1",
            "::ffff:169.254.169.254",
            "::ffff:a9fe:a9fe",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "::169.254.169.254",
        ] {
            assert_eq!(c(a), CloudMetadata, "{a}");
        }
    }

    #[test]
    fn ipv6_ranges_and_embedded_ipv4() {
        for (a, want) in [
            ("::1", Loopback),
            ("::", Unspecified),
            ("fe80::1", LinkLocal),
            ("fd12:3456::1", Private),
            ("fc00::1", Private),
            ("ff02::1", Multicast),
            ("2001:db8::1", Reserved),
            ("2001::1", Reserved),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:8.8.8.8", Public),
            ("64:ff9b::7f00:1", Loopback),
            ("2002:7f00:1::", Loopback),
            ("2606:4700::1111", Public),
            ("2a04:4e42::223", Public),
        ] {
            assert_eq!(c(a), want, "{a}");
        }
        assert_eq!(
            canonical("::ffff:1.2.3.4".parse().unwrap()),
            "1.2.3.4".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn this_hosts_own_public_address() {
        let local = LocalAddrs::from_list(["203.1.1.1".parse().unwrap()]);
        assert_eq!(classify("203.1.1.1".parse().unwrap(), &local), ThisHost);
        assert_eq!(
            classify("::ffff:203.1.1.1".parse().unwrap(), &local),
            ThisHost
        );
        assert_eq!(classify("203.1.1.2".parse().unwrap(), &local), Public);
    }

    #[cfg(unix)]
    #[test]
    fn this_host_includes_loopback_interface() {
        let local = LocalAddrs::of_this_host().unwrap();
        assert!(local.contains("127.0.0.1".parse().unwrap()), "{local:?}");
    }
}
