//! Name resolution for the egress proxy: the system resolver, or a fixed
//! table for tests.
//!
//! The resolver is a closed enum, not a trait, on purpose: the fixed table
//! is the *only* way a name may resolve to a loopback address the proxy
//! will dial, and only for entries a test marks so explicitly
//! ([`FixedEntry::loopback_ok`]). Tests build their world on loopback
//! without touching `/etc/hosts`; the same names without the mark — and
//! every name the system resolver returns — are refused as loopback.
//! Metadata, link-local, private and this-host addresses are refused for
//! every resolver, marked or not.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::net::classify::{canonical, AddressClass};

/// Names go to this resolver exactly once per connection; the proxy dials
/// what it returned (no second lookup, so no DNS rebinding between check
/// and connect).
#[derive(Debug, Clone)]
pub enum Resolver {
    /// getaddrinfo on a blocking thread (tokio's `lookup_host`).
    System,
    /// A fixed table; names not in it do not resolve.
    Fixed(FixedResolver),
}

/// One name in the fixed table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedEntry {
    pub addrs: Vec<IpAddr>,
    /// The test seam: may this entry's *loopback* addresses be dialled?
    pub loopback_ok: bool,
}

/// The test resolver. Parsed from `CODEWHALE_TEST_RESOLVE` by the CLI
/// (`name=ip[,ip...][;name=...]`, an entry written `name=ip!loopback`
/// may reach loopback); its use is reported as `partial`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixedResolver {
    table: BTreeMap<String, FixedEntry>,
}

/// What a lookup returned, with the seam's verdict attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub addrs: Vec<SocketAddr>,
    /// True only for a fixed entry marked `loopback_ok`.
    pub loopback_ok: bool,
}

impl FixedResolver {
    pub fn new() -> Self {
        FixedResolver::default()
    }

    /// Add a name whose addresses are judged like any other's.
    pub fn insert(&mut self, name: &str, addrs: Vec<IpAddr>) -> &mut Self {
        self.table.insert(
            name.to_ascii_lowercase(),
            FixedEntry {
                addrs,
                loopback_ok: false,
            },
        );
        self
    }

    /// Add a name that may resolve to loopback and be dialled there: the
    /// explicit test seam (see the module doc).
    pub fn insert_loopback_ok(&mut self, name: &str, addrs: Vec<IpAddr>) -> &mut Self {
        self.table.insert(
            name.to_ascii_lowercase(),
            FixedEntry {
                addrs,
                loopback_ok: true,
            },
        );
        self
    }

    /// Parse `name=ip[,ip...][!loopback][;name=...]`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut r = FixedResolver::new();
        for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, rest) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}`: expected name=ip[,ip...][!loopback]"))?;
            let (ips, loopback_ok) = match rest.strip_suffix("!loopback") {
                Some(ips) => (ips, true),
                None => (rest, false),
            };
            let mut addrs = Vec::new();
            for ip in ips.split(',').map(str::trim) {
                addrs.push(
                    ip.parse::<IpAddr>()
                        .map_err(|_| format!("`{item}`: `{ip}` is not an IP address"))?,
                );
            }
            if loopback_ok {
                r.insert_loopback_ok(name.trim(), addrs);
            } else {
                r.insert(name.trim(), addrs);
            }
        }
        Ok(r)
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.table.keys().map(String::as_str)
    }
}

impl Resolver {
    /// Resolve once. An empty answer is an error (`NotFound`).
    pub async fn resolve(&self, name: &str, port: u16) -> io::Result<Resolved> {
        let (addrs, loopback_ok) = match self {
            Resolver::System => {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port)).await?.collect();
                (addrs, false)
            }
            Resolver::Fixed(f) => match f.table.get(&name.to_ascii_lowercase()) {
                Some(e) => (
                    e.addrs
                        .iter()
                        .map(|ip| SocketAddr::new(*ip, port))
                        .collect(),
                    e.loopback_ok,
                ),
                None => (Vec::new(), false),
            },
        };
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{name} does not resolve"),
            ));
        }
        Ok(Resolved { addrs, loopback_ok })
    }

    /// Is this the test resolver (reported as partial when in use)?
    pub fn is_test_seam(&self) -> bool {
        matches!(self, Resolver::Fixed(_))
    }
}

/// May the gate dial an address of this class, given the lookup's seam
/// verdict? Only loopback can be waived, only by a marked fixed entry.
pub fn dialable(class: AddressClass, ip: IpAddr, resolved: &Resolved) -> bool {
    match class {
        AddressClass::Public => true,
        AddressClass::Loopback => resolved.loopback_ok && canonical(ip).is_loopback(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fixed_table_resolves_only_its_names() {
        let r = Resolver::Fixed(
            FixedResolver::parse("a.test=127.0.0.1!loopback; b.test=10.0.0.1,::1").unwrap(),
        );
        let a = r.resolve("A.test", 443).await.unwrap();
        assert_eq!(a.addrs, vec!["127.0.0.1:443".parse().unwrap()]);
        assert!(a.loopback_ok);
        let b = r.resolve("b.test", 80).await.unwrap();
        assert_eq!(b.addrs.len(), 2);
        assert!(!b.loopback_ok);
        let e = r.resolve("c.test", 80).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(r.is_test_seam());
        assert!(!Resolver::System.is_test_seam());
    }

    #[test]
    fn parse_errors_name_the_entry() {
        let e = FixedResolver::parse("x.test=nope").unwrap_err();
        assert!(e.contains("`x.test=nope`") && e.contains("`nope`"), "{e}");
        assert!(FixedResolver::parse("noequals")
            .unwrap_err()
            .contains("expected"));
    }

    #[test]
    fn only_a_marked_entry_waives_loopback_and_nothing_else() {
        let marked = Resolved {
            addrs: vec![],
            loopback_ok: true,
        };
        let unmarked = Resolved {
            addrs: vec![],
            loopback_ok: false,
        };
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(dialable(AddressClass::Loopback, lo, &marked));
        assert!(!dialable(AddressClass::Loopback, lo, &unmarked));
        let md: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(!dialable(AddressClass::CloudMetadata, md, &marked));
        assert!(!dialable(
            AddressClass::Private,
            "10.0.0.1".parse().unwrap(),
            &marked
        ));
        assert!(!dialable(
            AddressClass::ThisHost,
            "203.0.0.1".parse().unwrap(),
            &marked
        ));
    }
}
