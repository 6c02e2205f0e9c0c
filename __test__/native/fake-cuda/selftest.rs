//! Proof that cudarc (>= 0.19.5, features std/driver/dynamic-loading/cuda-12080,
//! default features off) runs end to end against the fake CUDA driver, a TEST
//! DOUBLE built by `__test__/native/fake-cuda/build.sh`.
//!
//! Reference copy only: this file is NOT built by CI. To run it, put it in a
//! scratch crate as src/main.rs with
//!   cudarc = { version = "0.19", default-features = false,
//!              features = ["std", "driver", "dynamic-loading", "cuda-12080"] }
//!   libloading = "0.9"
//! and run
//!   LD_LIBRARY_PATH=<repo>/target/fake-cuda cargo run -- fake
//!   LD_LIBRARY_PATH=<repo>/target/fake-cuda FAKE_CUDA_MEMORY_POOLS=0 cargo run -- fake
//!   env -u LD_LIBRARY_PATH cargo run -- absent

use cudarc::driver::{result, sys, CudaContext, DevicePtr, DriverError};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::Arc;

/// The fake's control API, found in the copy cudarc already loaded.
struct Fake {
    _lib: libloading::os::unix::Library,
    reset: unsafe extern "C" fn(),
    call_count: unsafe extern "C" fn(*const c_char) -> i64,
    set_fault: unsafe extern "C" fn(*const c_char, c_uint, c_int) -> c_int,
    set_deferred: unsafe extern "C" fn(c_int),
    live_allocations: unsafe extern "C" fn() -> i64,
    live_events: unsafe extern "C" fn() -> i64,
    live_streams: unsafe extern "C" fn() -> i64,
    host_syncs: unsafe extern "C" fn() -> i64,
    pending_ops: unsafe extern "C" fn() -> i64,
    ep_count: unsafe extern "C" fn() -> c_uint,
    ep_name: unsafe extern "C" fn(c_uint) -> *const c_char,
}

const RTLD_NOW: c_int = 0x2;
const RTLD_NOLOAD: c_int = 0x4; // glibc

impl Fake {
    fn attach() -> Fake {
        unsafe {
            let lib = libloading::os::unix::Library::open(Some("libcuda.so"), RTLD_NOW | RTLD_NOLOAD)
                .expect("libcuda.so is not loaded");
            let is_fake: unsafe extern "C" fn() -> c_int =
                *lib.get(b"fake_cuda_is_fake").expect("the loaded libcuda is not the fake");
            assert_eq!(is_fake(), 1);
            macro_rules! sym {
                ($n:literal) => {
                    *lib.get($n).expect(std::str::from_utf8($n).unwrap())
                };
            }
            Fake {
                reset: sym!(b"fake_cuda_reset"),
                call_count: sym!(b"fake_cuda_call_count"),
                set_fault: sym!(b"fake_cuda_set_fault"),
                set_deferred: sym!(b"fake_cuda_set_deferred"),
                live_allocations: sym!(b"fake_cuda_live_allocations"),
                live_events: sym!(b"fake_cuda_live_events"),
                live_streams: sym!(b"fake_cuda_live_streams"),
                host_syncs: sym!(b"fake_cuda_host_syncs"),
                pending_ops: sym!(b"fake_cuda_pending_ops"),
                ep_count: sym!(b"fake_cuda_entry_point_count"),
                ep_name: sym!(b"fake_cuda_entry_point_name"),
                _lib: lib,
            }
        }
    }
    fn count(&self, name: &str) -> i64 {
        let c = CString::new(name).unwrap();
        unsafe { (self.call_count)(c.as_ptr()) }
    }
    fn fault(&self, name: &str, nth: u32, result: sys::CUresult) {
        let c = CString::new(name).unwrap();
        assert_eq!(unsafe { (self.set_fault)(c.as_ptr(), nth, result as c_int) }, 0);
    }
    fn nonzero_counts(&self) -> Vec<(String, i64)> {
        let mut v = Vec::new();
        for i in 0..unsafe { (self.ep_count)() } {
            let name = unsafe { CStr::from_ptr((self.ep_name)(i)) }.to_string_lossy().into_owned();
            let n = self.count(&name);
            if n > 0 {
                v.push((name, n));
            }
        }
        v
    }
}

fn ptr_attr<T: Default>(attr: sys::CUpointer_attribute, ptr: sys::CUdeviceptr) -> Result<T, DriverError> {
    let mut v = T::default();
    unsafe { sys::cuPointerGetAttribute(&mut v as *mut T as *mut c_void, attr, ptr) }.result()?;
    Ok(v)
}

fn absent() {
    // No libcuda anywhere on the search path.
    let present = unsafe { sys::is_culib_present() };
    println!("is_culib_present() without the fake: {present}");
    assert!(!present);
    // What cudarc does if one calls it anyway: a panic (not a Result).
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(|| CudaContext::new(0).map(|_| ()));
    std::panic::set_hook(prev);
    println!("CudaContext::new(0) without a driver panics: {}", r.is_err());
    assert!(r.is_err());
    println!("absent: OK");
}

fn fake() {
    use sys::CUpointer_attribute::*;
    assert!(unsafe { sys::is_culib_present() });
    let ctx = CudaContext::new(0).expect("CudaContext::new(0)");
    let fake = Fake::attach();
    let pools = ctx.has_async_alloc();
    let alloc_ep = if pools { "cuMemAllocAsync" } else { "cuMemAlloc_v2" };
    println!("device: {} (memory pools: {pools})", ctx.name().unwrap());
    assert_eq!(CudaContext::device_count().unwrap(), 1);

    // Basic round trip on the default stream (immediate mode).
    let stream = ctx.default_stream();
    let host: Vec<u32> = (0..16).collect();
    let dev = stream.clone_htod(&host).unwrap();
    assert_eq!(stream.clone_dtoh(&dev).unwrap(), host);
    let zeros = stream.alloc_zeros::<u32>(8).unwrap();
    let mut copy = stream.alloc_zeros::<u32>(16).unwrap();
    stream.memcpy_dtod(&dev, &mut copy).unwrap();
    assert_eq!(stream.clone_dtoh(&copy).unwrap(), host);
    assert_eq!(stream.clone_dtoh(&zeros).unwrap(), vec![0u32; 8]);
    drop((zeros, copy));

    // (e) pointer attributes of an interior pointer, via sys (cudarc's
    // `result` module has no pointer-attribute wrapper).
    let (base, _guard) = dev.device_ptr(&stream);
    let interior = base + 4 * 4;
    let mt: c_uint = ptr_attr(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, interior).unwrap();
    assert_eq!(mt, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as c_uint);
    let ord: c_int = ptr_attr(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, interior).unwrap();
    assert_eq!(ord, 0);
    let start: sys::CUdeviceptr = ptr_attr(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, interior).unwrap();
    assert_eq!(start, base);
    let size: usize = ptr_attr(CU_POINTER_ATTRIBUTE_RANGE_SIZE, interior).unwrap();
    assert_eq!(size, 16 * 4);
    let managed: c_uint = ptr_attr(CU_POINTER_ATTRIBUTE_IS_MANAGED, interior).unwrap();
    assert_eq!(managed, 0);
    let c: usize = ptr_attr(CU_POINTER_ATTRIBUTE_CONTEXT, interior).unwrap();
    assert_eq!(c, ctx.cu_ctx() as usize);
    let host_ptr = host.as_ptr() as sys::CUdeviceptr;
    let e = ptr_attr::<c_uint>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, host_ptr).unwrap_err();
    assert_eq!(e.0, sys::CUresult::CUDA_ERROR_INVALID_VALUE);
    println!("pointer attribute of a host pointer -> {e}");
    let mut attrs = [CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL];
    let (mut mt2, mut ord2): (c_uint, c_int) = (99, 99);
    let mut data = [&mut mt2 as *mut _ as *mut c_void, &mut ord2 as *mut _ as *mut c_void];
    unsafe { sys::cuPointerGetAttributes(2, attrs.as_mut_ptr(), data.as_mut_ptr(), host_ptr) }
        .result()
        .unwrap();
    assert_eq!((mt2, ord2), (0, -2));
    let (free, total) = result::mem_get_info().unwrap();
    assert!(free < total);
    drop(_guard);

    // (a)/(b) deferred mode: producer on stream A, consumer on stream B.
    // cudarc's own event tracking would insert the wait for us, so it is
    // switched off to play a producer that manages ordering by hand.
    println!("entry points called so far (context, round trip, attributes):");
    for (name, n) in fake.nonzero_counts() {
        println!("  {name}: {n}");
    }
    unsafe { (fake.reset)() };
    unsafe { (fake.set_deferred)(1) };
    unsafe { ctx.disable_event_tracking() };
    let a = ctx.new_stream().unwrap();
    let b = ctx.new_stream().unwrap();
    const N: usize = 64;
    let buf = a.clone_htod(&[1u32; N]).unwrap();
    a.synchronize().unwrap();
    let (ptr, g) = buf.device_ptr(&a);
    drop(g);

    unsafe { result::memset_d8_async(ptr, 7, N * 4, a.cu_stream()) }.unwrap();
    assert_eq!(unsafe { (fake.pending_ops)() }, 1);
    let ev = a.record_event(None).unwrap();
    b.wait(&ev).unwrap();
    let with_wait = b.clone_dtoh(&buf).unwrap();
    assert_eq!(with_wait, vec![0x0707_0707u32; N], "(a) ordered consumer must see the write");
    println!("(a) deferred, record+wait: consumer sees {:#x} (right)", with_wait[0]);

    unsafe { result::memset_d8_async(ptr, 9, N * 4, a.cu_stream()) }.unwrap();
    let without_wait = b.clone_dtoh(&buf).unwrap();
    assert_eq!(without_wait, vec![0x0707_0707u32; N], "(b) unordered consumer must see stale data");
    println!("(b) deferred, no wait: consumer sees {:#x} (WRONG, as intended)", without_wait[0]);
    a.synchronize().unwrap();
    assert_eq!(b.clone_dtoh(&buf).unwrap(), vec![0x0909_0909u32; N]);

    // cudarc's automatic tracking (re-enabled) orders a cross-stream read.
    unsafe { ctx.enable_event_tracking() };
    let mut tracked = a.alloc_zeros::<u32>(N).unwrap();
    a.memcpy_htod(&[5u32; N], &mut tracked).unwrap();
    assert_eq!(b.clone_dtoh(&tracked).unwrap(), vec![5u32; N]);
    println!("(f) deferred, cudarc event tracking: consumer sees 5 (right)");

    // (c) counters and host syncs for this phase.
    let syncs = unsafe { (fake.host_syncs)() };
    println!(
        "(c) memsetD8Async={} eventRecord={} streamWaitEvent={} dtohAsync={} hostSyncs={}",
        fake.count("cuMemsetD8Async"),
        fake.count("cuEventRecord"),
        fake.count("cuStreamWaitEvent"),
        fake.count("cuMemcpyDtoHAsync_v2"),
        syncs
    );
    assert_eq!(fake.count("cuMemsetD8Async"), 3); // two by hand, one from alloc_zeros
    assert!(fake.count("cuStreamWaitEvent") >= 2);
    // a.synchronize() twice + four clone_dtoh into pageable memory
    assert_eq!(syncs, 6);
    drop((buf, tracked, ev));
    unsafe { (fake.set_deferred)(0) };

    // (d) injected faults surface as Err, with cuGetErrorString formatting.
    fake.fault(alloc_ep, 1, sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    let err = a.alloc_zeros::<u8>(16).unwrap_err();
    assert_eq!(err.0, sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    println!("(d) injected {alloc_ep} fault -> Err({err:?})");
    fake.fault("cuMemcpyHtoDAsync_v2", 1, sys::CUresult::CUDA_ERROR_UNKNOWN);
    assert_eq!(a.clone_htod(&[1u8; 4]).unwrap_err().0, sys::CUresult::CUDA_ERROR_UNKNOWN);
    fake.fault("cuEventRecord", 1, sys::CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert_eq!(a.record_event(None).unwrap_err().0, sys::CUresult::CUDA_ERROR_INVALID_HANDLE);
    assert!(a.alloc_zeros::<u8>(16).is_ok()); // one-shot faults

    // A slice used from another thread: cudarc binds the context there.
    let set_before = fake.count("cuCtxSetCurrent");
    let s2 = a.clone();
    std::thread::spawn(move || {
        let v = s2.clone_htod(&[3u16; 5]).unwrap();
        assert_eq!(s2.clone_dtoh(&v).unwrap(), vec![3u16; 5]);
    })
    .join()
    .unwrap();
    assert_eq!(fake.count("cuCtxSetCurrent"), set_before + 1);

    drop((a, b, dev, stream));
    assert_eq!(unsafe { (fake.live_allocations)() }, 0, "leaked device memory");
    assert_eq!(unsafe { (fake.live_events)() }, 0, "leaked events");
    assert_eq!(unsafe { (fake.live_streams)() }, 0, "leaked streams");
    let ctx_weak = Arc::downgrade(&ctx);
    drop(ctx);
    assert!(ctx_weak.upgrade().is_none());
    assert_eq!(fake.count("cuDevicePrimaryCtxRelease_v2"), 1);
    println!("entry points called since the deferred phase began (cudarc's calls):");
    for (name, n) in fake.nonzero_counts() {
        println!("  {name}: {n}");
    }
    println!("fake: OK");
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("absent") => absent(),
        Some("fake") | None => fake(),
        Some(other) => panic!("unknown mode {other}"),
    }
}
