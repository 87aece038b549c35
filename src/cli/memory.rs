//! The process's memory at rest (docs/benchmarks.md, "At rest"): large values held only while used (the
//! word dictionary, `knowledge::held`) hand their memory back to the system when dropped
//! ([`return_freed_memory`]), where the allocator would otherwise keep it for reuse.

/// Asks the allocator (mimalloc) to return the pages it holds free to the system now, rather than
/// after its own delay, which a process at rest never reaches: nothing allocates, so nothing purges.
pub fn return_freed_memory() {
    // SAFETY: `mi_collect` takes no pointers; it may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
