//! ownalloc: a Rust program whose #[global_allocator] never calls malloc,
//! as one built on a statically linked jemalloc (tikv-jemallocator, whose
//! entry points are _rjem_malloc and kin): every block is its own
//! anonymous mapping made with a raw mmap system call, which neither the
//! agent's malloc hooks nor its mmap hook see.  Holds 32 MiB, prints
//! "ready", then each line "grow" on stdin holds 32 MiB more and prints
//! "ready"; EOF exits 0.  For tests/integration/test_unseen.py.
use std::alloc::{GlobalAlloc, Layout};
use std::io::{BufRead, Write};

extern "C" {
    fn syscall(n: i64, ...) -> i64;
}

const SYS_MMAP: i64 = 9;
const SYS_MUNMAP: i64 = 11;

fn round(n: usize) -> usize {
    (n.max(1) + 4095) & !4095
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn _rjem_malloc(size: usize) -> *mut u8 {
    // PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS: page-aligned, zeroed.
    let p = unsafe { syscall(SYS_MMAP, 0usize, round(size), 3i64, 0x22i64, -1i64, 0i64) };
    if p < 0 {
        std::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn _rjem_sdallocx(p: *mut u8, size: usize, _flags: i32) {
    unsafe {
        syscall(SYS_MUNMAP, p as usize, round(size));
    }
}

struct Own;

unsafe impl GlobalAlloc for Own {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() > 4096 {
            return std::ptr::null_mut();
        }
        _rjem_malloc(l.size())
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        _rjem_sdallocx(p, l.size(), 0)
    }
}

#[global_allocator]
static A: Own = Own;

#[inline(never)]
fn hold(held: &mut Vec<Vec<u8>>) {
    let mut v = vec![0u8; 32 << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    held.push(v);
}

fn main() {
    let mut held = Vec::with_capacity(64);
    hold(&mut held);
    let out = std::io::stdout();
    writeln!(out.lock(), "ready").unwrap();
    out.lock().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        if line.unwrap().trim() == "grow" {
            hold(&mut held);
        }
        writeln!(out.lock(), "ready").unwrap();
        out.lock().flush().unwrap();
    }
}
