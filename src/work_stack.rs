//! A stack of work that several threads share, where working on one item
//! can find more (directories found while reading a directory).
//!
//! The work is over when the stack is empty and no thread holds an item
//! (nobody can find more), or when someone [`WorkStack::stop`]s it. An
//! item taken is handed back with what it found when its [`Taken`] drops,
//! however its work ends: a thread that panicked does not leave the
//! others waiting for items it would have found. Used by the first `.env`
//! scan's read-ahead (`policy::env_scan`) and the snapshot size walk
//! (`snapshot::guard::walk`).

use std::sync::{Condvar, Mutex, MutexGuard};

/// The shared stack.
pub struct WorkStack<T> {
    state: Mutex<State<T>>,
    more: Condvar,
}

struct State<T> {
    items: Vec<T>,
    /// Items taken and not handed back yet.
    busy: usize,
    done: bool,
}

impl<T> WorkStack<T> {
    pub fn new(first: Vec<T>) -> Self {
        WorkStack {
            state: Mutex::new(State {
                items: first,
                busy: 0,
                done: false,
            }),
            more: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next item (the one found last), waiting while others may still
    /// find more; `None` once the work is over.
    pub fn take(&self) -> Option<Taken<'_, T>> {
        let mut s = self.lock();
        loop {
            if s.done {
                return None;
            }
            if let Some(item) = s.items.pop() {
                s.busy += 1;
                return Some(Taken {
                    stack: self,
                    item: Some(item),
                    found: Vec::new(),
                });
            }
            if s.busy == 0 {
                s.done = true;
                drop(s);
                self.more.notify_all();
                return None;
            }
            s = self.more.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// End the work now: every `take` from here on (and every one
    /// waiting) gets `None`.
    pub fn stop(&self) {
        self.lock().done = true;
        self.more.notify_all();
    }
}

/// An item taken from the stack; what its work found goes in `found`, and
/// both are handed back when this drops.
pub struct Taken<'s, T> {
    stack: &'s WorkStack<T>,
    item: Option<T>,
    /// Items found while working on this one.
    pub found: Vec<T>,
}

impl<T> Taken<'_, T> {
    /// The item itself (once: the work owns it from here).
    pub fn item(&mut self) -> Option<T> {
        self.item.take()
    }
}

impl<T> Drop for Taken<'_, T> {
    fn drop(&mut self) {
        let mut s = self.stack.lock();
        s.items.append(&mut self.found);
        s.busy -= 1;
        drop(s);
        self.stack.more.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// A tree of 1 + 3 + 9 + 27 items found as it is worked: four threads
    /// see every item once, and all end.
    #[test]
    fn threads_work_every_item_found_once() {
        let stack = WorkStack::new(vec![0u32]);
        let seen = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while let Some(mut t) = stack.take() {
                        let depth = t.item().unwrap();
                        seen.fetch_add(1, Relaxed);
                        if depth < 3 {
                            t.found = vec![depth + 1; 3];
                        }
                    }
                });
            }
        });
        assert_eq!(seen.into_inner(), 1 + 3 + 9 + 27);
    }

    /// A thread that panics mid-item still hands it back: the others end
    /// instead of waiting for it, and what it found is worked.
    #[test]
    fn a_panicking_worker_does_not_leave_the_others_waiting() {
        let stack = WorkStack::new(vec![0u32]);
        let seen = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                let mut t = stack.take().unwrap();
                t.item();
                t.found = vec![1, 1];
                panic!("mid-item");
            });
            assert!(first.join().is_err());
            let other = s.spawn(|| {
                while let Some(mut t) = stack.take() {
                    t.item();
                    seen.fetch_add(1, Relaxed);
                }
            });
            other.join().unwrap();
        });
        assert_eq!(seen.into_inner(), 2);
    }

    /// `stop` ends the work with items left.
    #[test]
    fn stop_ends_the_work_with_items_left() {
        let stack = WorkStack::new(vec![1, 2, 3]);
        let t = stack.take().unwrap();
        stack.stop();
        drop(t);
        assert!(stack.take().is_none());
    }
}
