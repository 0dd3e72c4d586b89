//! `app-server --mobile`: which URLs a phone on the same network can use.
//! The interfaces are read with `getifaddrs` (through `nix`), and the
//! warning names each non-loopback address as a URL, because binding
//! 0.0.0.0 exposes the server (the API still needs the token) to every
//! network the machine is on.

use std::net::{IpAddr, SocketAddr};

/// The machine's non-loopback addresses a phone could reach when the
/// server binds `bound` (an unspecified address: every interface of its
/// family — `::` is dual-stack here; a specific one: itself). IPv6
/// link-local addresses are left out: a browser cannot use them without
/// a zone.
pub fn reachable(bound: IpAddr, interfaces: &[IpAddr]) -> Vec<IpAddr> {
    if !bound.is_unspecified() {
        return if bound.is_loopback() {
            Vec::new()
        } else {
            vec![bound]
        };
    }
    let mut out: Vec<IpAddr> = interfaces
        .iter()
        .copied()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .filter(|ip| match ip {
            IpAddr::V4(_) => true,
            IpAddr::V6(v6) => bound.is_ipv6() && (v6.segments()[0] & 0xffc0) != 0xfe80,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The phone page's URL at `ip:port`.
pub fn mobile_url(ip: IpAddr, port: u16) -> String {
    format!("http://{}/mobile", SocketAddr::new(ip, port))
}

/// Every address of every interface that is up (empty if the system will
/// not say).
#[cfg(unix)]
pub fn interface_addresses() -> Vec<IpAddr> {
    use nix::net::if_::InterfaceFlags;
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter(|a| a.flags.contains(InterfaceFlags::IFF_UP))
        .filter_map(|a| {
            let s = a.address?;
            if let Some(v4) = s.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

#[cfg(not(unix))]
pub fn interface_addresses() -> Vec<IpAddr> {
    Vec::new()
}

/// Print where the phone page is: on loopback, its one URL; otherwise a
/// warning naming each LAN URL.
pub fn announce(addr: SocketAddr) {
    let port = addr.port();
    if addr.ip().is_loopback() {
        eprintln!(
            "codewhale app-server: phone page: {} (this machine only)",
            mobile_url(addr.ip(), port)
        );
        return;
    }
    let urls: Vec<String> = reachable(addr.ip(), &interface_addresses())
        .into_iter()
        .map(|ip| mobile_url(ip, port))
        .collect();
    eprintln!(
        "codewhale app-server: warning: --mobile listens on {addr}: every device on these networks can reach this server; its API needs the runtime token, which travels unencrypted (plain HTTP): use it only on a network you trust, or bind 127.0.0.1 behind an SSH tunnel or VPN; phone page:"
    );
    if urls.is_empty() {
        eprintln!("  (no non-loopback address found)");
    }
    for u in urls {
        eprintln!("  {u}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s}"))
    }

    #[test]
    fn an_unspecified_bind_lists_each_usable_non_loopback_address() {
        let ifs = [
            ip("127.0.0.1"),
            ip("192.168.1.20"),
            ip("10.0.0.5"),
            ip("::1"),
            ip("fe80::1"),
            ip("2001:db8::7"),
            ip("192.168.1.20"),
        ];
        assert_eq!(
            reachable(ip("0.0.0.0"), &ifs),
            vec![ip("10.0.0.5"), ip("192.168.1.20")]
        );
        assert_eq!(
            reachable(ip("::"), &ifs),
            vec![ip("10.0.0.5"), ip("192.168.1.20"), ip("2001:db8::7")]
        );
        assert_eq!(reachable(ip("10.0.0.5"), &ifs), vec![ip("10.0.0.5")]);
        assert!(reachable(ip("127.0.0.1"), &ifs).is_empty());
        assert_eq!(
            mobile_url(ip("2001:db8::7"), 7878),
            "http://[2001:db8::7]:7878/mobile"
        );
    }
}
