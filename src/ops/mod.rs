//! Operations on tensors, called by the binding layer only: where a tensor enters (`import`),
//! where it leaves (`export`), copies (`copy`), JS views of host memory (`view`) and tensors
//! handed to another JS thread (`transfer`).

pub(crate) mod copy;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod transfer;
pub(crate) mod view;
