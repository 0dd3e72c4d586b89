//! The limits a request's tree of sub-agents shares: the running-agent
//! cap (`max_subagents`), the depth limit, the spawns per request, the
//! optional token budget, and the write scopes of concurrent writers.
//!
//! The cap counts *running* agents: a parent waiting on its children
//! gives its slot back while it waits ([`Tree::release_while`]), so no
//! tree deadlocks under a small cap. The request's own agent (depth 0)
//! never holds a slot.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The deepest agent that may exist: the request's agent is depth 0; an
/// agent at this depth runs but is not offered `agent`.
pub const MAX_DEPTH: u32 = 3;
/// Spawns one request may make in total, its whole tree counted.
pub const MAX_SPAWNS_PER_REQUEST: u32 = 64;
/// `max_subagents` when nothing sets it.
pub const DEFAULT_MAX_SUBAGENTS: u32 = 8;
/// A child's stall limit when nothing sets it: a model request of a
/// sub-agent that has not answered in this long stops the child.
pub const DEFAULT_STALL: std::time::Duration = std::time::Duration::from_secs(300);
/// The largest `max_subagents` accepted (a larger value is a config error).
pub use crate::config::user::MAX_SUBAGENTS_LIMIT;

/// Why a spawn was refused before the child ran.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefused {
    #[error("sub-agent depth limit: an agent at depth {depth} may not spawn (the request's agent is depth 0; the deepest allowed is {MAX_DEPTH})")]
    Depth { depth: u32 },
    #[error("this request already spawned {MAX_SPAWNS_PER_REQUEST} sub-agents (the per-request limit); finish the work without more sub-agents")]
    Spawns,
    #[error("the sub-agents' token budget of {budget} tokens is spent ({spent} used)")]
    Budget { budget: u64, spent: u64 },
    #[error("write scope overlaps a running writer's ({other}): two concurrent writers may not share files; nothing was written")]
    Overlap { other: String },
}

impl SpawnRefused {
    /// The child status the refusal reports (`limit` for the budget).
    pub fn status(&self) -> &'static str {
        match self {
            SpawnRefused::Budget { .. } => "limit",
            _ => "denied",
        }
    }
}

/// What a writer may change while it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteScope {
    /// The whole workspace (a writer without `write_scope`).
    Whole,
    /// These workspace-relative paths (files or directories).
    Paths(Vec<PathBuf>),
}

impl WriteScope {
    fn overlaps(&self, other: &WriteScope) -> bool {
        match (self, other) {
            (WriteScope::Whole, _) | (_, WriteScope::Whole) => true,
            (WriteScope::Paths(a), WriteScope::Paths(b)) => a
                .iter()
                .any(|x| b.iter().any(|y| prefix_of(x, y) || prefix_of(y, x))),
        }
    }

    fn describe(&self) -> String {
        match self {
            WriteScope::Whole => "the whole workspace".into(),
            WriteScope::Paths(p) => p
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// Whether the workspace-relative `path` lies inside one of `scope`'s
/// paths (lexically: `.` dropped, `..` taken back; a path that climbs out
/// of the workspace is inside none).
pub fn within_scope(path: &Path, scope: &[PathBuf]) -> bool {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return false;
                }
            }
            Component::Normal(p) => parts.push(p),
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    let norm: PathBuf = parts.iter().collect();
    scope.iter().any(|s| prefix_of(s, &norm))
}

/// `a` names `b` or a directory above it (component-wise, `.` ignored).
fn prefix_of(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| -> Vec<PathBuf> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect()
    };
    let (a, b) = (norm(a), norm(b));
    a.len() <= b.len() && a.iter().zip(&b).all(|(x, y)| x == y)
}

/// One request's tree: shared by every agent in it.
#[derive(Debug)]
pub struct Tree {
    slots: Arc<Semaphore>,
    cap: u32,
    spawns: AtomicU32,
    next_id: AtomicU64,
    next_scope: AtomicU64,
    budget: Option<u64>,
    spent: AtomicU64,
    stall: std::time::Duration,
    writers: Mutex<Vec<(u64, WriteScope)>>,
}

/// A running writer's registration; dropping it frees the scope.
#[derive(Debug)]
pub struct ScopeGuard {
    tree: Arc<Tree>,
    id: u64,
}

impl ScopeGuard {
    /// The registration's id (its holder's descendants pass it to
    /// [`Tree::admit`]: a writer's own children work inside its scope).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let mut w = self.tree.writers.lock().unwrap_or_else(|e| e.into_inner());
        w.retain(|(id, _)| *id != self.id);
    }
}

impl Tree {
    /// A tree with at most `cap` running children (clamped to 1..=64; the
    /// config rejects larger values before this) and an optional token
    /// budget for everything below the request's agent.
    pub fn new(cap: u32, budget: Option<u64>) -> Arc<Self> {
        Self::with_stall(cap, budget, DEFAULT_STALL)
    }

    /// [`Tree::new`] with a stall limit for the children's model requests.
    pub fn with_stall(cap: u32, budget: Option<u64>, stall: std::time::Duration) -> Arc<Self> {
        let cap = cap.clamp(1, MAX_SUBAGENTS_LIMIT);
        Arc::new(Tree {
            slots: Arc::new(Semaphore::new(cap as usize)),
            cap,
            spawns: AtomicU32::new(0),
            next_id: AtomicU64::new(1),
            next_scope: AtomicU64::new(1),
            budget,
            spent: AtomicU64::new(0),
            stall,
            writers: Mutex::new(Vec::new()),
        })
    }

    pub fn cap(&self) -> u32 {
        self.cap
    }

    /// How long a child's model request may go unanswered.
    pub fn stall(&self) -> std::time::Duration {
        self.stall
    }

    /// Children spawned so far in this request.
    pub fn spawned(&self) -> u32 {
        self.spawns.load(Ordering::SeqCst)
    }

    /// Tokens the tree below the request's agent used.
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::SeqCst)
    }

    /// Count tokens a child's model request used.
    pub fn charge(&self, tokens: u64) {
        self.spent.fetch_add(tokens, Ordering::SeqCst);
    }

    /// `Err` once the token budget is spent.
    pub fn check_budget(&self) -> Result<(), SpawnRefused> {
        match self.budget {
            Some(budget) if self.spent() >= budget => Err(SpawnRefused::Budget {
                budget,
                spent: self.spent(),
            }),
            _ => Ok(()),
        }
    }

    /// Admit one spawn by an agent at `parent_depth` (depth, the request's
    /// spawn count, the budget, the writer's scope). `ancestors` are the
    /// scope registrations of the spawning agent and its ancestors: they
    /// are waiting on this child, so they do not conflict with it. Returns
    /// the child's id and, for a writer, its scope registration.
    pub fn admit(
        self: &Arc<Self>,
        parent_depth: u32,
        scope: Option<WriteScope>,
        ancestors: &[u64],
    ) -> Result<(u64, Option<ScopeGuard>), SpawnRefused> {
        if parent_depth >= MAX_DEPTH {
            return Err(SpawnRefused::Depth {
                depth: parent_depth,
            });
        }
        self.check_budget()?;
        let guard = match scope {
            Some(s) => {
                let mut w = self.writers.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((_, other)) = w
                    .iter()
                    .find(|(id, o)| !ancestors.contains(id) && o.overlaps(&s))
                {
                    return Err(SpawnRefused::Overlap {
                        other: other.describe(),
                    });
                }
                let id = self.next_scope.fetch_add(1, Ordering::SeqCst);
                w.push((id, s));
                Some(id)
            }
            None => None,
        };
        let n = self.spawns.fetch_add(1, Ordering::SeqCst);
        if n >= MAX_SPAWNS_PER_REQUEST {
            self.spawns.fetch_sub(1, Ordering::SeqCst);
            if let Some(id) = guard {
                let mut w = self.writers.lock().unwrap_or_else(|e| e.into_inner());
                w.retain(|(i, _)| *i != id);
            }
            return Err(SpawnRefused::Spawns);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        Ok((
            id,
            guard.map(|id| ScopeGuard {
                tree: self.clone(),
                id,
            }),
        ))
    }

    /// Wait for a running slot.
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }
}

/// A child's slot, which it gives back while it waits on its own children.
#[derive(Default)]
pub struct Slot(Mutex<Option<OwnedSemaphorePermit>>);

impl Slot {
    pub fn hold(p: Option<OwnedSemaphorePermit>) -> Self {
        Slot(Mutex::new(p))
    }

    /// Give the slot back (a parent about to wait on its children);
    /// returns whether one was held.
    pub fn release(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some()
    }

    /// Hold `p` again.
    pub fn put(&self, p: Option<OwnedSemaphorePermit>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn depth_limit_and_spawn_cap() {
        let t = Tree::new(4, None);
        assert!(t.admit(2, None, &[]).is_ok());
        assert_eq!(
            t.admit(3, None, &[]).unwrap_err(),
            SpawnRefused::Depth { depth: 3 }
        );
        for _ in 1..MAX_SPAWNS_PER_REQUEST {
            t.admit(0, None, &[]).unwrap();
        }
        assert_eq!(t.admit(0, None, &[]).unwrap_err(), SpawnRefused::Spawns);
    }

    #[test]
    fn overlapping_writers_are_refused_until_the_first_ends() {
        let t = Tree::new(8, None);
        let (_, a) = t
            .admit(0, Some(WriteScope::Paths(vec!["src".into()])), &[])
            .unwrap();
        let e = t
            .admit(0, Some(WriteScope::Paths(vec!["./src/lib.rs".into()])), &[])
            .err()
            .unwrap();
        assert!(matches!(e, SpawnRefused::Overlap { .. }), "{e}");
        assert!(t.admit(0, Some(WriteScope::Whole), &[]).is_err());
        // A writer's own child works inside its scope.
        assert!(t
            .admit(
                1,
                Some(WriteScope::Paths(vec!["src/x.rs".into()])),
                &[a.as_ref().unwrap().id()]
            )
            .is_ok());
        let (_, b) = t
            .admit(0, Some(WriteScope::Paths(vec!["docs".into()])), &[])
            .unwrap();
        drop(a);
        drop(b);
        assert!(t.admit(0, Some(WriteScope::Whole), &[]).is_ok());
    }

    #[test]
    fn within_scope_is_lexical_and_never_climbs_out() {
        let scope = vec![PathBuf::from("src"), PathBuf::from("docs/a.md")];
        assert!(within_scope(Path::new("src/x.rs"), &scope));
        assert!(within_scope(Path::new("./docs/a.md"), &scope));
        assert!(!within_scope(Path::new("src/../Cargo.toml"), &scope));
        assert!(!within_scope(Path::new("docs/b.md"), &scope));
        assert!(!within_scope(Path::new("../src/x.rs"), &scope));
        assert!(!within_scope(Path::new("/etc/passwd"), &scope));
    }

    #[test]
    fn budget_spent_is_a_limit() {
        let t = Tree::new(8, Some(100));
        t.charge(100);
        let e = t.admit(0, None, &[]).unwrap_err();
        assert_eq!(e.status(), "limit");
    }
}
