//! The Node-API seam: where a tensor crosses between JavaScript values and the core. The core
//! (`layout`, `validation`, `import`, `export`, `view`, ...) knows no JS engine; these modules
//! add typed `#[napi]` arguments ([`arg`]), DLPack capsules as JS values ([`capsule`]), the
//! exchange table that lends tensors without a capsule ([`exchange`]) and the adapter that
//! turns other libraries' tensors into capsules ([`adapter`]), and hot calls: raw Node-API
//! callbacks whose typed arguments skip napi-rs's per-call machinery ([`hot`]).

pub mod adapter;
pub mod arg;
pub mod capsule;
pub mod exchange;
pub mod hot;
pub mod id_slots;
pub mod thread_key;
