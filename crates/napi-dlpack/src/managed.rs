//! Raw ownership of a `DLManagedTensor[Versioned]*`: whoever holds a [`ManagedTensor`] owes the
//! producer exactly one deleter call, and dropping it pays that debt. Nothing here reads the
//! tensor's metadata; validation lives in [`crate::validation`].

use core::ptr::NonNull;

use crate::error::{DLPackError, ErrorKind};
use crate::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion};

/// A pointer to one of the two owning DLPack structs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManagedPtr {
  Versioned(NonNull<DLManagedTensorVersioned>),
  Legacy(NonNull<DLManagedTensor>),
}

/// Owns a managed DLPack tensor and calls its deleter exactly once, when dropped.
///
/// The deleter is called on whatever thread drops this value; DLPack requires deleters to be
/// callable from any thread.
#[derive(Debug)]
pub struct ManagedTensor {
  ptr: ManagedPtr,
}

// SAFETY: DLPack requires the deleter to be callable from any thread, and a ManagedTensor only
// hands out shared reads of immutable metadata; moving the owner between threads is allowed.
unsafe impl Send for ManagedTensor {}
// SAFETY: `&ManagedTensor` only allows reading the struct, which the producer must not mutate
// while the consumer owns it.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
  /// Takes ownership of a versioned tensor.
  ///
  /// # Safety
  /// `ptr` must be NULL or point to a live `DLManagedTensorVersioned` whose ownership is
  /// transferred to the returned value (nobody else will call its deleter). At least the
  /// fields up to `flags` must be readable: that part of the struct is stable across majors.
  pub unsafe fn from_raw_versioned(
    ptr: *mut DLManagedTensorVersioned,
  ) -> Result<ManagedTensor, DLPackError> {
    NonNull::new(ptr)
      .map(|ptr| ManagedTensor {
        ptr: ManagedPtr::Versioned(ptr),
      })
      .ok_or_else(null_tensor)
  }

  /// Takes ownership of a legacy tensor.
  ///
  /// # Safety
  /// `ptr` must be NULL or point to a live `DLManagedTensor` whose ownership is transferred to
  /// the returned value.
  pub unsafe fn from_raw_legacy(ptr: *mut DLManagedTensor) -> Result<ManagedTensor, DLPackError> {
    NonNull::new(ptr)
      .map(|ptr| ManagedTensor {
        ptr: ManagedPtr::Legacy(ptr),
      })
      .ok_or_else(null_tensor)
  }

  /// Takes ownership of either struct.
  ///
  /// # Safety
  /// As for [`ManagedTensor::from_raw_versioned`] / [`ManagedTensor::from_raw_legacy`].
  pub unsafe fn from_ptr(ptr: ManagedPtr) -> ManagedTensor {
    ManagedTensor { ptr }
  }

  /// Gives up ownership without calling the deleter; the caller now owes that call.
  pub fn into_raw(self) -> ManagedPtr {
    let ptr = self.ptr;
    core::mem::forget(self);
    ptr
  }

  #[inline]
  pub fn as_ptr(&self) -> ManagedPtr {
    self.ptr
  }

  #[inline]
  pub fn is_versioned(&self) -> bool {
    matches!(self.ptr, ManagedPtr::Versioned(_))
  }

  /// The version of a versioned tensor (always safe to read), `None` for legacy ones.
  #[inline]
  pub fn version(&self) -> Option<DLPackVersion> {
    match self.ptr {
      // SAFETY: `version` precedes `flags` and is stable across majors (type invariant).
      ManagedPtr::Versioned(ptr) => Some(unsafe { ptr.as_ref() }.version),
      ManagedPtr::Legacy(_) => None,
    }
  }

  /// The flags of a versioned tensor, 0 for legacy ones.
  ///
  /// Only meaningful once the major version has been checked.
  #[inline]
  pub fn flags(&self) -> u64 {
    match self.ptr {
      // SAFETY: `flags` is part of the stable prefix of the versioned struct.
      ManagedPtr::Versioned(ptr) => unsafe { ptr.as_ref() }.flags,
      ManagedPtr::Legacy(_) => 0,
    }
  }

  /// The `DLTensor` inside.
  ///
  /// # Safety
  /// For versioned tensors the caller must have checked that the major version is one this
  /// crate understands; with another major the layout after `flags` is unknown.
  #[inline]
  pub unsafe fn dl_tensor(&self) -> &crate::ffi::DLTensor {
    match self.ptr {
      // SAFETY: the pointee is live while we own it; major version checked by the caller.
      ManagedPtr::Versioned(ptr) => unsafe { &ptr.as_ref().dl_tensor },
      // SAFETY: the legacy struct has a single layout.
      ManagedPtr::Legacy(ptr) => unsafe { &ptr.as_ref().dl_tensor },
    }
  }
}

impl Drop for ManagedTensor {
  fn drop(&mut self) {
    match self.ptr {
      ManagedPtr::Versioned(ptr) => {
        // SAFETY: we own the tensor; `deleter` is in the stable prefix. DLPack allows a NULL
        // deleter ("no way to provide a reasonable destructor"), in which case nothing runs.
        if let Some(deleter) = unsafe { ptr.as_ref() }.deleter {
          // SAFETY: called exactly once, with the pointer the producer gave us.
          unsafe { deleter(ptr.as_ptr()) };
        }
      }
      ManagedPtr::Legacy(ptr) => {
        // SAFETY: as above, for the legacy struct.
        if let Some(deleter) = unsafe { ptr.as_ref() }.deleter {
          // SAFETY: called exactly once, with the pointer the producer gave us.
          unsafe { deleter(ptr.as_ptr()) };
        }
      }
    }
  }
}

fn null_tensor() -> DLPackError {
  DLPackError::new(ErrorKind::NullTensor, "NULL managed tensor pointer")
}
