//! Dropping every capability in the helper stage, and no_new_privs.
//!
//! bwrap already drops capabilities for unprivileged users, but when
//! codewhale runs as root bwrap keeps some; the helper therefore clears all
//! five sets itself so the report can state "all zero" as a fact.

use caps::CapSet;

#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    #[error("prctl(PR_SET_NO_NEW_PRIVS): {0}")]
    NoNewPrivs(std::io::Error),
    #[error("dropping capabilities ({set}): {source}")]
    Drop {
        set: &'static str,
        source: caps::errors::CapsError,
    },
}

/// Set no_new_privs: from here on, setuid bits and file capabilities no
/// longer raise privileges on exec (and seccomp may be installed unprivileged).
pub fn set_no_new_privs() -> Result<(), CapsError> {
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only
    // and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(CapsError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Clear the bounding, ambient, inheritable, effective and permitted sets.
///
/// The bounding set can only be shrunk while CAP_SETPCAP is effective, so
/// it goes first; without CAP_SETPCAP there is nothing to drop from it that
/// could be regained anyway (no_new_privs blocks file capabilities).
pub fn drop_all() -> Result<(), CapsError> {
    let has_setpcap =
        caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    if has_setpcap {
        clear_bounding()?;
    }
    for (set, name) in [
        (CapSet::Ambient, "ambient"),
        (CapSet::Inheritable, "inheritable"),
        (CapSet::Effective, "effective"),
        (CapSet::Permitted, "permitted"),
    ] {
        caps::clear(None, set).map_err(|source| CapsError::Drop { set: name, source })?;
    }
    Ok(())
}

/// Drop every capability from the bounding set. `caps::clear` reads each
/// one before dropping it (twice the `prctl`s, on every sandboxed spawn);
/// dropping one that is already out is a no-op, and `EINVAL` means the
/// running kernel does not know that capability (nothing to drop).
fn clear_bounding() -> Result<(), CapsError> {
    for cap in caps::all() {
        // SAFETY: prctl with PR_CAPBSET_DROP takes integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                libc::c_ulong::from(cap.index()),
                0,
                0,
                0,
            )
        };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(CapsError::Drop {
                    set: "bounding",
                    source: caps::errors::CapsError::from(format!("PR_CAPBSET_DROP {cap}: {err}")),
                });
            }
        }
    }
    Ok(())
}

/// Whether effective and permitted are both empty now.
pub fn all_dropped() -> bool {
    [CapSet::Effective, CapSet::Permitted]
        .iter()
        .all(|s| caps::read(None, *s).map(|c| c.is_empty()).unwrap_or(false))
}
