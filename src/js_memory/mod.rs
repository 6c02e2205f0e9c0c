//! The few raw Node-API calls that touch ArrayBuffer memory, in one place.
//!
//! napi-rs's own external-buffer helpers fall back to a copy silently, and some of those
//! fallbacks returned views of freed memory before 3.12.3 (see docs/protocol.md). We make these
//! calls ourselves so that every fallback is explicit, reported (`isCopy`) and tested: the
//! `NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1` switch forces the Electron behaviour in any runtime.
//!
//! It also owns the per-environment state that lets a JS buffer reference be released from any
//! thread: DLPack deleters may run anywhere, but `napi_delete_reference` must run on the JS
//! thread of its environment.
//!
//! And it owns what happens when an environment (the main thread, or a Worker) ends. Its
//! cleanup hook, [`on_env_teardown`], frees every external of ours that the runtime has not
//! finalized yet, then deletes every reference still alive:
//! - Bun and Deno run env cleanup hooks when a Worker ends, but not the finalizers of the
//!   `napi_external`s still alive in it (Bun runs those of external ArrayBuffers and wrapped
//!   objects, Deno only those of external ArrayBuffers). Without the hook, the tensors of
//!   unconsumed capsules and of imported tensors left in a Worker were never released there.
//! - Node runs those finalizers after the cleanup hooks, but does not free references the addon
//!   did not delete itself (Node 20: 40 bytes per `napi_create_reference`).
//!
//! Finalizers that do run after the hook find their external already freed (it has left the
//! live set) and do nothing, so everything is freed exactly once in every runtime.
//!
//! Split by what each part holds: [`env`] the per-environment state (references released from
//! any thread, our externals, the teardown hook), [`buffers`] ArrayBuffers and typed arrays
//! (external buffers, limits, detaching, the untransferable mark), [`externals`] tagged
//! `napi_external`s.

mod buffers;
mod env;
mod externals;

pub use buffers::*;
pub use env::*;
pub use externals::*;
