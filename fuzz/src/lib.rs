//! Helpers of the fuzz targets (fuzz_targets/): what they need that is not
//! Hangar's own code under test, and the allocator every target runs with.

pub mod s3_node;
pub mod sigv4;

use std::alloc::{GlobalAlloc, Layout, System};

/// Largest single allocation a target may make. Nothing Hangar parses
/// needs more; an input that makes a decoder allocate what a length field
/// claims (a frame, a row, a collection) reaches it, and the abort makes
/// libFuzzer keep the input as a crash. (libFuzzer's own -malloc_limit_mb
/// needs a sanitizer's allocator hooks, which `--sanitizer none` lacks.)
pub const MAX_ALLOCATION: usize = 256 << 20;

/// The system allocator, refusing allocations past [`MAX_ALLOCATION`].
pub struct Capped;

// SAFETY: forwards to the system allocator, unchanged, for every size it
// allows.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn check(size: usize) {
    if size > MAX_ALLOCATION {
        // No formatting: that would allocate.
        use std::io::Write;
        let _ = std::io::stderr().write_all(b"fuzz target: one allocation over 256 MiB\n");
        std::process::abort();
    }
}

#[global_allocator]
static GLOBAL: Capped = Capped;
