//! Landlock access rights as plain data, with the ABI that introduced each.
//!
//! The plan is built from these types rather than from the `landlock`
//! crate's `BitFlags` so that it serialises to stable, readable names
//! (`sandbox explain --json`) and so that the ABI filtering done by the test
//! seam (`LandlockOptions::max_abi`) is explicit. The bit values are the
//! kernel's `LANDLOCK_ACCESS_FS_*` / `LANDLOCK_ACCESS_NET_*` /
//! `LANDLOCK_SCOPE_*` values, so converting to the crate's flags is a
//! `from_bits` (checked by a unit test against the crate's own tables).

use serde::{Serialize, Serializer};

/// The Landlock ABI this code was written and tested against (Linux 6.15).
/// Rights of newer ABIs (e.g. ABI 9's `resolve-unix`) are deliberately not
/// requested until they are tested on a kernel that has them.
pub const TARGET_ABI: u32 = 7;

/// One row of a rights table: bit, name shown in plans, ABI that added it.
#[derive(Clone, Copy, Debug)]
pub struct RightInfo {
    pub bit: u64,
    pub name: &'static str,
    pub since_abi: u32,
}

const fn r(bit: u64, name: &'static str, since_abi: u32) -> RightInfo {
    RightInfo {
        bit,
        name,
        since_abi,
    }
}

/// Filesystem rights (`LANDLOCK_ACCESS_FS_*`).
pub const FS_RIGHTS: &[RightInfo] = &[
    r(1 << 0, "execute", 1),
    r(1 << 1, "write-file", 1),
    r(1 << 2, "read-file", 1),
    r(1 << 3, "read-dir", 1),
    r(1 << 4, "remove-dir", 1),
    r(1 << 5, "remove-file", 1),
    r(1 << 6, "make-char", 1),
    r(1 << 7, "make-dir", 1),
    r(1 << 8, "make-reg", 1),
    r(1 << 9, "make-sock", 1),
    r(1 << 10, "make-fifo", 1),
    r(1 << 11, "make-block", 1),
    r(1 << 12, "make-sym", 1),
    r(1 << 13, "refer", 2),
    r(1 << 14, "truncate", 3),
    r(1 << 15, "ioctl-dev", 5),
];

/// Network rights (`LANDLOCK_ACCESS_NET_*`).
pub const NET_RIGHTS: &[RightInfo] = &[r(1 << 0, "bind-tcp", 4), r(1 << 1, "connect-tcp", 4)];

/// Scopes (`LANDLOCK_SCOPE_*`).
pub const SCOPES: &[RightInfo] = &[r(1 << 0, "abstract-unix-socket", 6), r(1 << 1, "signal", 6)];

/// A set of rights from one table. The table is a type parameter so the
/// three kinds cannot be mixed up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Rights<K> {
    bits: u64,
    kind: std::marker::PhantomData<K>,
}

/// Marker types selecting a table.
pub trait Table: Copy {
    const ROWS: &'static [RightInfo];
    const KIND: &'static str;
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Fs;
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Net;
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Scope;
impl Table for Fs {
    const ROWS: &'static [RightInfo] = FS_RIGHTS;
    const KIND: &'static str = "filesystem right";
}
impl Table for Net {
    const ROWS: &'static [RightInfo] = NET_RIGHTS;
    const KIND: &'static str = "network right";
}
impl Table for Scope {
    const ROWS: &'static [RightInfo] = SCOPES;
    const KIND: &'static str = "scope";
}

pub type FsAccess = Rights<Fs>;
pub type NetAccess = Rights<Net>;
pub type ScopeSet = Rights<Scope>;

impl<K: Table> Rights<K> {
    pub const fn from_bits(bits: u64) -> Self {
        Rights {
            bits,
            kind: std::marker::PhantomData,
        }
    }
    pub const fn empty() -> Self {
        Self::from_bits(0)
    }
    pub const fn bits(self) -> u64 {
        self.bits
    }
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }
    pub const fn union(self, o: Self) -> Self {
        Self::from_bits(self.bits | o.bits)
    }
    pub const fn intersect(self, o: Self) -> Self {
        Self::from_bits(self.bits & o.bits)
    }
    pub const fn minus(self, o: Self) -> Self {
        Self::from_bits(self.bits & !o.bits)
    }
    pub const fn contains(self, o: Self) -> bool {
        self.bits & o.bits == o.bits
    }

    /// Every right of the table that ABI `abi` supports.
    pub fn supported(abi: u32) -> Self {
        Self::from_bits(
            K::ROWS
                .iter()
                .filter(|r| r.since_abi <= abi)
                .fold(0, |acc, r| acc | r.bit),
        )
    }

    /// Names of the rights in the set, in table order.
    pub fn names(self) -> Vec<&'static str> {
        K::ROWS
            .iter()
            .filter(|r| self.bits & r.bit != 0)
            .map(|r| r.name)
            .collect()
    }

    /// One human line per right, with the ABI that introduced it
    /// (used for the `dropped` lists).
    pub fn describe(self) -> Vec<String> {
        K::ROWS
            .iter()
            .filter(|r| self.bits & r.bit != 0)
            .map(|r| format!("{} {} (needs ABI {})", K::KIND, r.name, r.since_abi))
            .collect()
    }
}

impl<K: Table> Serialize for Rights<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

impl<K: Table> std::fmt::Display for Rights<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

// Named filesystem rights and the groups the planner grants.
pub const EXECUTE: FsAccess = FsAccess::from_bits(1 << 0);
pub const WRITE_FILE: FsAccess = FsAccess::from_bits(1 << 1);
pub const READ_FILE: FsAccess = FsAccess::from_bits(1 << 2);
pub const READ_DIR: FsAccess = FsAccess::from_bits(1 << 3);
pub const MAKE_CHAR: FsAccess = FsAccess::from_bits(1 << 6);
pub const MAKE_BLOCK: FsAccess = FsAccess::from_bits(1 << 11);
pub const TRUNCATE: FsAccess = FsAccess::from_bits(1 << 14);
pub const IOCTL_DEV: FsAccess = FsAccess::from_bits(1 << 15);

/// Rights that are valid on a rule whose path is not a directory (the
/// kernel rejects directory-only rights on such rules with `EINVAL`).
pub const FILE_RIGHTS: FsAccess = EXECUTE
    .union(WRITE_FILE)
    .union(READ_FILE)
    .union(TRUNCATE)
    .union(IOCTL_DEV);

/// Reading contents: what a deny-read path withholds.
pub const READ_CONTENT: FsAccess = READ_FILE.union(EXECUTE);

/// Everything the write side of a writable root grants: all of ABI 7's write
/// rights except creating device nodes (never needed, and for root without
/// namespaces a device node is a way out) and device ioctls (granted only on
/// the few device files the plan names).
pub fn write_tree() -> FsAccess {
    FsAccess::supported(TARGET_ABI)
        .minus(READ_CONTENT)
        .minus(READ_DIR)
        .minus(MAKE_CHAR)
        .minus(MAKE_BLOCK)
        .minus(IOCTL_DEV)
}

/// Writing an existing device file such as `/dev/null` (`> /dev/null` opens
/// with `O_TRUNC`, hence truncate).
pub const DEVICE_WRITE: FsAccess = WRITE_FILE.union(TRUNCATE).union(IOCTL_DEV);

pub const BIND_TCP: NetAccess = NetAccess::from_bits(1 << 0);
pub const CONNECT_TCP: NetAccess = NetAccess::from_bits(1 << 1);
pub const SCOPE_ABSTRACT_UNIX: ScopeSet = ScopeSet::from_bits(1 << 0);
pub const SCOPE_SIGNAL: ScopeSet = ScopeSet::from_bits(1 << 1);
