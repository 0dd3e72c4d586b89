//! Which of a list of object ids the user's object store holds, read from
//! its pack indexes and loose-object files without running git.
//!
//! The seed's blobs are copied into the side store after the snapshot that
//! names them is committed ([`super::blobcopy`]); a blob the user's store
//! lacks (a repository damaged by hand: partial clones and borrowed stores
//! are turned down before) would only be found then, too late to take the
//! files the long way. So the seed checks first that every id is there.
//! `git cat-file --batch-check` does that in ~0.12 s of CPU at 100,000
//! ids; the pack indexes are sorted tables of ids, so a merge with the
//! sorted list costs a few milliseconds.
//!
//! Pack index version 2 (gitformat-pack(5), "Version 2 pack-*.idx files"):
//! the magic `\377tOc`, the version (4 bytes, big-endian 2), a fan-out
//! table of 256 four-byte counts, then the object names, 20 bytes each
//! for SHA-1, in sorted order. An index of any other version, or one too
//! short for what its header says, makes the answer "unknown": the seed
//! then takes the long way, as for a missing blob.

use std::path::Path;

/// A SHA-1 object id.
pub type Oid = [u8; 20];

/// A 40-digit lowercase hex id as bytes; `None` for anything else. Git
/// prints ids in lowercase. (`hex::decode_to_slice` took ~20 ms for the
/// 100,000 ids of a monorepo's index, a table lookup per digit ~2 ms.)
pub fn parse_oid(hex: &[u8]) -> Option<Oid> {
    const fn nibbles() -> [u8; 256] {
        let mut t = [0xffu8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    }
    const NIBBLE: [u8; 256] = nibbles();
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[pair[0] as usize], NIBBLE[pair[1] as usize]);
        if hi > 15 || lo > 15 {
            return None;
        }
        *o = hi << 4 | lo;
    }
    Some(out)
}

/// Sort `ids` and drop repeats, for [`missing`]: by two integer keys
/// rather than a byte comparison each (~9 → ~4 ms at 100,000 ids).
pub fn sort_ids(ids: &mut Vec<Oid>) {
    ids.sort_unstable_by_key(|id| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&id[..16]);
        let mut b = [0u8; 4];
        b.copy_from_slice(&id[16..]);
        (u128::from_be_bytes(a), u32::from_be_bytes(b))
    });
    ids.dedup();
}

/// The ids of `wanted` (sorted, without duplicates) that neither a pack
/// of `objects` nor a loose object there holds; `None` when a pack index
/// cannot be read as version 2.
pub fn missing(objects: &Path, wanted: &[Oid]) -> Option<Vec<Oid>> {
    let mut found = vec![false; wanted.len()];
    if let Ok(rd) = std::fs::read_dir(objects.join("pack")) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.as_encoded_bytes();
            if !(name.starts_with(b"pack-") && name.ends_with(b".idx")) {
                continue;
            }
            let bytes = std::fs::read(e.path()).ok()?;
            mark(names(&bytes)?, wanted, &mut found);
        }
    }
    let mut out = Vec::new();
    for (id, f) in wanted.iter().zip(found) {
        if f {
            continue;
        }
        let hex = hex::encode(id);
        if !objects.join(&hex[..2]).join(&hex[2..]).is_file() {
            out.push(*id);
        }
    }
    Some(out)
}

/// The sorted object-name table of a version 2 pack index.
fn names(idx: &[u8]) -> Option<&[u8]> {
    const HEADER: usize = 8;
    const FANOUT: usize = 256 * 4;
    if idx.len() < HEADER + FANOUT || idx[..4] != [0xff, b't', b'O', b'c'] {
        return None;
    }
    if idx[4..8] != [0, 0, 0, 2] {
        return None;
    }
    let last = &idx[HEADER + FANOUT - 4..HEADER + FANOUT];
    let count = u32::from_be_bytes([last[0], last[1], last[2], last[3]]) as usize;
    let start = HEADER + FANOUT;
    idx.get(start..start + count.checked_mul(20)?)
}

/// Mark in `found` each id of `wanted` (sorted) that the sorted `table`
/// (20-byte names) holds: one merge of the two.
fn mark(table: &[u8], wanted: &[Oid], found: &mut [bool]) {
    let mut t = table.chunks_exact(20).peekable();
    for (i, w) in wanted.iter().enumerate() {
        while t.next_if(|n| *n < &w[..]).is_some() {}
        match t.peek() {
            Some(n) if *n == &w[..] => found[i] = true,
            Some(_) => {}
            None => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn idx_of(ids: &[Oid]) -> Vec<u8> {
        let mut v = vec![0xff, b't', b'O', b'c', 0, 0, 0, 2];
        let mut sorted = ids.to_vec();
        sorted.sort();
        for b in 0..256usize {
            let n = sorted.iter().filter(|id| (id[0] as usize) <= b).count() as u32;
            v.extend(n.to_be_bytes());
        }
        for id in &sorted {
            v.extend(id);
        }
        v
    }

    fn id(b: u8, c: u8) -> Oid {
        let mut o = [c; 20];
        o[0] = b;
        o
    }

    #[test]
    fn a_merge_finds_exactly_the_ids_the_table_holds() {
        let table = idx_of(&[id(1, 1), id(3, 3), id(200, 9)]);
        let wanted = [id(0, 0), id(1, 1), id(2, 2), id(3, 3), id(250, 0)];
        let mut found = vec![false; wanted.len()];
        mark(names(&table).unwrap(), &wanted, &mut found);
        assert_eq!(found, [false, true, false, true, false]);
    }

    #[test]
    fn ids_parse_and_sort_as_bytes_do() {
        let hexes = [
            "ffffffffffffffffffffffffffffffffffffff00",
            "00000000000000000000000000000000000000ff",
            "0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef01234566",
            "00000000000000000000000000000000000000ff",
        ];
        let mut ids: Vec<Oid> = hexes
            .iter()
            .map(|h| parse_oid(h.as_bytes()).unwrap())
            .collect();
        for (h, id) in hexes.iter().zip(&ids) {
            assert_eq!(hex::encode(id), *h);
        }
        let mut by_bytes = ids.clone();
        by_bytes.sort();
        by_bytes.dedup();
        sort_ids(&mut ids);
        assert_eq!(ids, by_bytes);
        for bad in [
            "0123",
            "0123456789ABCDEF0123456789abcdef01234567",
            "g123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(parse_oid(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn an_index_of_another_version_or_cut_short_is_unknown() {
        let mut v1 = idx_of(&[id(1, 1)]);
        v1[7] = 1;
        assert!(names(&v1).is_none());
        let good = idx_of(&[id(1, 1), id(2, 2)]);
        assert!(names(&good[..good.len() - 1]).is_none());
        assert!(names(b"PACK").is_none());
    }
}
