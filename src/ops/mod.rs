//! Operations on tensors, called by the binding layer only: where a tensor enters (`import`),
//! where it leaves (`export`), copies (`copy`) and JS views of host memory (`view`). What an
//! import or export was asked for is decided by the pure functions of `negotiation`.

pub(crate) mod copy;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod negotiation;
pub(crate) mod view;
