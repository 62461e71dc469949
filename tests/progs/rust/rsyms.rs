// Symbolization target (tests/integration/test_symbols.py), built with
// rustc -O -g, once with v0 and once with legacy symbol mangling.  Uses the
// System allocator (malloc).  Prints "ready"; reads a line; exits 0.
// Before "ready" it holds:
//   - a Vec<u64> grown by push in rsyms::grow::grow_vec (4 MiB capacity);
//   - 64 Box<[u8; 16384]> made in rsyms::grow::Holder::boxes (a method);
//   - 32 Vec<u8> of 32 KiB allocated in the async fn rsyms::tasks::fill,
//     awaited through rsyms::tasks::Traced (a Future wrapper, like
//     tracing's Instrumented) and polled by a minimal executor.
use std::future::Future;
use std::hint::black_box;
use std::io::BufRead;
use std::pin::Pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

pub mod grow {
    #[inline(never)]
    pub fn grow_vec(n: u64) -> Vec<u64> {
        let mut v = Vec::new();
        for i in 0..n {
            v.push(std::hint::black_box(i));
        }
        v
    }

    pub struct Holder {
        pub held: Vec<Box<[u8; 16384]>>,
    }

    impl Holder {
        #[inline(never)]
        pub fn boxes(&mut self, n: usize) {
            for i in 0..n {
                self.held.push(Box::new([i as u8; 16384]));
            }
        }
    }
}

pub mod tasks {
    use super::*;

    pub struct Traced<F> {
        pub inner: F,
    }

    impl<F: Future> Future for Traced<F> {
        type Output = F::Output;
        #[inline(never)]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            // Safety: inner is structurally pinned and never moved.
            let inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
            inner.poll(cx)
        }
    }

    #[inline(never)]
    pub async fn fill(n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(black_box(vec![i as u8; 32768]));
            Yield(false).await;
        }
        out
    }

    struct Yield(bool);

    impl Future for Yield {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[inline(never)]
    pub fn block_on<F: Future>(f: F) -> F::Output {
        fn raw() -> RawWaker {
            fn clone(_: *const ()) -> RawWaker {
                raw()
            }
            fn noop(_: *const ()) {}
            static VT: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
            RawWaker::new(std::ptr::null(), &VT)
        }
        let waker = unsafe { Waker::from_raw(raw()) };
        let mut cx = Context::from_waker(&waker);
        let mut f = Box::pin(f);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}

fn main() {
    let v = grow::grow_vec(512 * 1024);
    let mut h = grow::Holder { held: Vec::with_capacity(64) };
    h.boxes(64);
    let filled = tasks::block_on(tasks::Traced { inner: tasks::fill(32) });
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    black_box((&v, &h.held, &filled));
}
