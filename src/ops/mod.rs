//! Operations on tensors, called by the binding layer only: where a tensor enters (`import`),
//! where it leaves (`export`), copies (`copy`) and JS views of host memory (`view`).

pub(crate) mod copy;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod view;
