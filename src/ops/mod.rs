//! Operations on tensors, called by the binding layer only: where a tensor enters (`import`),
//! where it leaves (`export`), copies (`copy`), conversions (`convert`: permuted views, dense
//! copies, dtype conversion), JS views of host memory (`view`) and tensors handed to another JS
//! thread (`transfer`). What an import or export was asked for is decided by the pure functions
//! of `negotiation`.

pub(crate) mod convert;
pub(crate) mod copy;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod negotiation;
pub(crate) mod transfer;
pub(crate) mod view;
