//! Stacks for the `clone(CLONE_VM)` processes of the stage.
//!
//! They share codewhale's address space, so an overflow would write into
//! whatever lies below the stack: each stack is its own mapping with a
//! `PROT_NONE` guard page at the low end (as thread stacks have), so an
//! overflow faults instead.
//!
//! Stacks are recycled (a few per process): mapping, guarding, faulting in
//! and unmapping two stacks per command would be a visible part of a
//! sandboxed `true`. A stack is only given back once nothing runs on it.

use std::io;
use std::sync::Mutex;

/// How many idle stacks are kept.
const POOL: usize = 8;

static IDLE: Mutex<Vec<Stack>> = Mutex::new(Vec::new());

/// One mapped stack with a guard page; unmapped on drop.
pub struct Stack {
    base: *mut libc::c_void,
    len: usize,
    /// The usable size asked for.
    size: usize,
}

// SAFETY: the mapping is owned by this value alone; it is only handed to
// `clone` as a raw stack pointer while the value is alive.
unsafe impl Send for Stack {}
// SAFETY: shared references expose nothing but the top address.
unsafe impl Sync for Stack {}

impl Stack {
    /// Map `size` usable bytes plus one guard page.
    pub fn new(size: usize) -> io::Result<Stack> {
        // SAFETY: sysconf has no memory effects.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = size.div_ceil(page) * page + page;
        // SAFETY: an anonymous private mapping of our own; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len, size };
        // SAFETY: the lowest page of the mapping we just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// An idle stack of `size` usable bytes, or a new one.
    pub fn take(size: usize) -> io::Result<Stack> {
        if let Ok(mut idle) = IDLE.lock() {
            if let Some(i) = idle.iter().position(|s| s.size == size) {
                return Ok(idle.swap_remove(i));
            }
        }
        Stack::new(size)
    }

    /// Keep `self` for a later [`take`](Stack::take). The caller
    /// guarantees that no process runs on it any more.
    pub fn recycle(self) {
        if let Ok(mut idle) = IDLE.lock() {
            if idle.len() < POOL {
                idle.push(self);
            }
        }
    }

    /// The initial stack pointer (the high end, 16-byte aligned).
    pub fn top(&self) -> *mut libc::c_void {
        let end = self.base as usize + self.len;
        (end & !15) as *mut libc::c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns; nothing runs on
        // it any more (the processes using it have exited or exec'd).
        unsafe { libc::munmap(self.base, self.len) };
    }
}
