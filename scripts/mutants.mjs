// `npm run mutants`: mutation testing of the crate's safety logic. Each mutant below removes or
// weakens ONE safety check (a bounds or overflow check, an alignment check, the consume-once
// exchange, the deleter-once rule, the READ_ONLY refusal, a dtype or bool check). The script
// applies them one at a time to a scratch copy of the repository (never to the working tree),
// runs the core crate's tests against each and, for the mutants the JS suite must also kill,
// rebuilds the addons and runs the C addon's specs (__test__/abi/c-addon-*.spec.ts). A mutant that no required step
// kills is a survivor: a safety check that no test guards. Exits 1 if any survives.
//
//   node scripts/mutants.mjs                 every mutant
//   node scripts/mutants.mjs stride bool     only mutants whose id contains one of the words
//   node scripts/mutants.mjs --list          list the mutants
//   node scripts/mutants.mjs --check         check every mutant's snippet is still there
//
// The scratch copy holds the repository's tracked and untracked (not ignored) files, so
// uncommitted edits are included. Its build directory is target/mutants/ of this repository,
// kept between runs (the first run seeds it from target/debug, target/release and
// target/consumer-addon when those exist), so each mutant only recompiles the crates.
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const crate = 'crates/napi-dlpack/src'

/**
 * id: short name; file: the file mutated; find: a snippet that occurs exactly once in it;
 * replace: what it becomes; js: the JS suite (c-addon-*.spec.ts, through the C fixture) must kill
 * it too, or, as a list of spec files, those specs must. Mutants of the addon (src/) are killed
 * by the addon crate's own Rust tests instead of the core crate's (`crate: addonCrate`), or,
 * where only a JS runtime can show the defect, by JS specs alone (`crate: null`). Mutants of the
 * Python bridge's glue (`bridge: true`) are compiled from the mutated bridge.c and killed by
 * examples/python-bridge/test/bridge.test.mjs; `note` marks one expected to survive, and why.
 * `env` (with `js`): extra environment of the JS specs' run; `fakeCuda: true` runs them against
 * the fake CUDA driver (a test double: target/fake-cuda first on LD_LIBRARY_PATH, two devices),
 * for mutants only a CUDA path shows.
 */
const addon = 'src'
const bridgeSource = 'examples/python-bridge/bridge.c'
const addonCrate = 'napi-dlpack-node'
const mutants = [
  // layout.rs (the layout arithmetic) and validation.rs (untrusted metadata)
  {
    id: 'stride-extent-wrapping-mul',
    file: `${crate}/layout.rs`,
    find: '.checked_mul(stride)\n      .ok_or_else(|| overflow("stride extent"))?;',
    replace: '.wrapping_mul(stride);',
    js: true,
  },
  {
    id: 'stride-extent-wrapping-add',
    file: `${crate}/layout.rs`,
    find: '.checked_add(reach)\n      .ok_or_else(|| overflow("stride extent"))?;',
    replace: '.wrapping_add(reach);',
  },
  {
    id: 'element-count-wrapping-mul',
    file: `${crate}/layout.rs`,
    find: '.checked_mul(dim)\n      .ok_or_else(|| overflow("element count"))?;',
    replace: '.wrapping_mul(dim);',
  },
  {
    id: 'negative-dimension-accepted',
    file: `${crate}/layout.rs`,
    find: 'if dim < 0 {\n      return Err(negative_dimension(shape));',
    replace: 'if false {\n      return Err(negative_dimension(shape));',
  },
  {
    // (The `<= isize::MAX` filter after it is no mutation target: on 64-bit targets it cannot
    // fail, isize::MAX being i64::MAX.)
    id: 'byte-span-wrapping-mul',
    file: `${crate}/layout.rs`,
    find: '.and_then(|elements| elements.checked_mul(itemsize))',
    replace: '.map(|elements| elements.wrapping_mul(itemsize))',
  },
  {
    id: 'address-below-zero-accepted',
    file: `${crate}/layout.rs`,
    find: 'if first_element < below || first_element.checked_add(from_first).is_none() {',
    replace: 'if first_element.checked_add(from_first).is_none() {',
  },
  {
    id: 'address-past-end-accepted',
    file: `${crate}/layout.rs`,
    find: 'if first_element < below || first_element.checked_add(from_first).is_none() {',
    replace: 'if first_element < below {',
  },
  {
    id: 'data-plus-byte-offset-wraps',
    file: `${crate}/validation.rs`,
    find: '(tensor.data as usize as u64)\n    .checked_add(tensor.byte_offset)',
    replace: 'Some((tensor.data as usize as u64).wrapping_add(tensor.byte_offset))',
  },
  {
    id: 'ndim-range-unchecked',
    file: `${crate}/validation.rs`,
    find: 'if tensor.ndim < 0 || tensor.ndim as usize > MAX_NDIM {',
    replace: 'if tensor.ndim < 0 {',
  },
  {
    id: 'null-shape-accepted',
    file: `${crate}/validation.rs`,
    find: 'if tensor.shape.is_null() {',
    replace: 'if false {',
  },
  {
    id: 'shape-alignment-unchecked',
    file: `${crate}/validation.rs`,
    find: 'if !tensor.shape.is_aligned() {',
    replace: 'if false {',
    js: true,
  },
  {
    id: 'strides-alignment-unchecked',
    file: `${crate}/validation.rs`,
    find: 'if !tensor.strides.is_aligned() {',
    replace: 'if false {',
    js: true,
  },
  {
    id: 'null-data-accepted',
    file: `${crate}/validation.rs`,
    find: 'if layout.numel() > 0 && tensor.data.is_null() {',
    replace: 'if false {',
  },
  {
    id: 'row-major-ignores-strides',
    file: `${crate}/layout.rs`,
    find: '    if dim != 1 {\n      if stride != expected {\n        return false;\n      }\n      expected *= dim;',
    replace: '    if dim != 1 {\n      expected *= dim;',
  },
  {
    id: 'fits-in-buffer-ignores-start',
    file: `${crate}/layout.rs`,
    find: 'if low < 0 || high > buffer_bytes as i128 {',
    replace: 'if high > buffer_bytes as i128 {',
  },
  {
    id: 'fits-in-buffer-ignores-end',
    file: `${crate}/layout.rs`,
    find: 'if low < 0 || high > buffer_bytes as i128 {',
    replace: 'if low < 0 {',
  },
  // managed.rs / import.rs: ownership and versions
  {
    id: 'managed-alignment-unchecked',
    file: `${crate}/managed.rs`,
    find: 'if ptr.address() & ALIGN_MASK == 0 {',
    replace: 'if true {',
    js: true,
  },
  {
    id: 'misaligned-refusal-deleter-twice',
    file: `${crate}/managed.rs`,
    find: '    unsafe { call_deleter(ptr) };\n    Err(',
    replace: '    unsafe { call_deleter(ptr) };\n    // SAFETY: mutant\n    unsafe { call_deleter(ptr) };\n    Err(',
    js: true,
  },
  {
    id: 'misaligned-refusal-deleter-skipped',
    file: `${crate}/managed.rs`,
    find: '    unsafe { call_deleter(ptr) };\n    Err(',
    replace: '    Err(',
  },
  {
    id: 'drop-skips-deleter',
    file: `${crate}/managed.rs`,
    find: 'unsafe { call_deleter(self.as_ptr()) };',
    replace: '',
  },
  {
    id: 'major-version-unchecked',
    file: `${crate}/import.rs`,
    find: 'if version.major != DLPACK_MAJOR_VERSION {',
    replace: 'if false {',
    js: true,
  },
  {
    id: 'synthesized-strides-overflow-ignored',
    file: `${crate}/import.rs`,
    find: 'if !write_row_major_strides(shape, &mut stored[..shape.len()]) {',
    replace: 'if !write_row_major_strides(shape, &mut stored[..shape.len()]) && false {',
  },
  // capsule.rs: consume once
  {
    id: 'consume-loads-instead-of-exchanging',
    file: `${crate}/node/capsule.rs`,
    find: 'let tensor = self.tensor.swap(ptr::null_mut(), Ordering::SeqCst);\n    managed_from_raw(self.kind, tensor).unwrap_or_else',
    replace: 'let tensor = self.tensor.load(Ordering::SeqCst);\n    managed_from_raw(self.kind, tensor).unwrap_or_else',
    js: true,
  },
  {
    id: 'release-loads-instead-of-exchanging',
    file: `${crate}/node/capsule.rs`,
    find: 'let tensor = self.tensor.swap(ptr::null_mut(), Ordering::SeqCst);\n    drop(managed_from_raw',
    replace: 'let tensor = self.tensor.load(Ordering::SeqCst);\n    drop(managed_from_raw',
  },
  {
    id: 'capsule-abi-unchecked',
    file: `${crate}/node/capsule.rs`,
    find: 'if self.abi_version == CAPSULE_ABI_VERSION && matches!(self.kind, KIND_LEGACY | KIND_VERSIONED)',
    replace: 'if true',
  },
  {
    id: 'fill-overwrites-a-full-payload',
    file: `${crate}/node/capsule.rs`,
    find: '.compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst)',
    replace: '.swap(raw, Ordering::SeqCst)\n      .is_null()\n      .then_some(())\n      .or(Some(()))\n      .ok_or(())',
  },
  // view.rs / dtype.rs: typed access
  {
    id: 'data-alignment-unchecked',
    file: `${crate}/view.rs`,
    find: 'if tensor.numel() > 0 && !(tensor.data_ptr() as usize).is_multiple_of(align_of::<T>()) {',
    replace: 'if false {',
    js: true,
  },
  {
    id: 'dtype-mismatch-unchecked',
    file: `${crate}/view.rs`,
    find: 'if tensor.dtype() != T::DTYPE {',
    replace: 'if false {',
  },
  {
    id: 'host-access-unchecked',
    file: `${crate}/view.rs`,
    find: 'if !tensor.device().is_host_accessible() {',
    replace: 'if false {',
  },
  {
    id: 'contiguity-unchecked',
    file: `${crate}/view.rs`,
    find: '  check_contiguous(tensor)?;\n',
    replace: '',
  },
  {
    id: 'read-only-unchecked',
    file: `${crate}/view.rs`,
    find: ') -> Result<BorrowedSliceMut<\'_, T>, DLPackError> {\n  if tensor.is_read_only() {',
    replace: ') -> Result<BorrowedSliceMut<\'_, T>, DLPackError> {\n  if false {',
  },
  {
    id: 'read-only-unchecked-strided-mut',
    file: `${crate}/view.rs`,
    find: ') -> Result<StridedViewMut<\'_, T>, DLPackError> {\n  if tensor.is_read_only() {',
    replace: ') -> Result<StridedViewMut<\'_, T>, DLPackError> {\n  if false {',
  },
  {
    id: 'bool-bits-unchecked-slice',
    file: `${crate}/view.rs`,
    find: '  check_bits::<T>(bytes)?;\n',
    replace: '',
    js: true,
  },
  {
    id: 'bool-bits-unchecked-strided',
    file: `${crate}/view.rs`,
    find: 'if !all_valid {',
    replace: 'if false && !all_valid {',
    js: true,
  },
  {
    id: 'view-index-off-by-one',
    file: `${crate}/layout.rs`,
    find: 'if i as u64 >= dim as u64 {',
    replace: 'if i as u64 > dim as u64 {',
  },
  {
    id: 'bool-byte-pattern-accepts-all',
    file: `${crate}/dtype.rs`,
    find: 'matches!(element, [0] | [1])',
    replace: 'matches!(element, [_])',
    js: true,
  },
  // aliasing.rs: two tensors over one memory never lent as `&mut` and `&` at once
  {
    id: 'aliasing-unchecked',
    file: `${crate}/aliasing.rs`,
    find: '.find(|held| held.overlaps(&range) && (exclusive || held.exclusive))',
    replace: '.find(|_| false)',
    js: ['__test__/abi/typed-args.spec.ts'],
  },
  {
    id: 'aliasing-readers-ignore-writers',
    file: `${crate}/aliasing.rs`,
    find: '.find(|held| held.overlaps(&range) && (exclusive || held.exclusive))',
    replace: '.find(|held| held.overlaps(&range) && exclusive)',
  },
  {
    id: 'aliasing-overlap-misses-the-last-byte',
    file: `${crate}/aliasing.rs`,
    find: 'self.start < other.end && other.start < self.end',
    replace: 'self.start + 1 < other.end && other.start + 1 < self.end',
  },
  {
    id: 'aliasing-write-view-claims-nothing',
    file: `${crate}/view.rs`,
    find: '  let claim = Claim::exclusive(tensor.span_start(), tensor.span_bytes())?;\n  let numel = tensor.numel();',
    replace: '  let claim = None;\n  let numel = tensor.numel();',
  },
  // exchange.rs: a JS value's external is trusted only through its tag, and only the per-object
  // kind lends when passed as the argument itself (`Tensor.native`)
  {
    id: 'exchange-external-tag-unchecked',
    file: `${crate}/node/exchange.rs`,
    find: '    if !tagged {\n      continue;\n    }',
    replace: '    if false && !tagged {\n      continue;\n    }',
    crate: null,
    js: ['__test__/abi/typed-args.spec.ts'],
  },
  {
    id: 'exchange-table-external-lends-as-argument',
    file: `${crate}/node/exchange.rs`,
    // TensorArg's path (`find_if_external`): one Node-API call for a handle.
    find: 'unsafe { classify_external(env, value, data, false) }',
    replace: 'unsafe { classify_external(env, value, data, true) }',
    crate: null,
    js: ['__test__/abi/typed-args.spec.ts'],
  },
  // include/napi_dlpack.h: napi_dlpack_tensor_extent, the C consumer's validation, must keep
  // import's rules (killed by crates/napi-dlpack/tests/fuzz_validation.rs, which compiles the
  // header and compares every verdict with the Rust validator's)
  {
    id: 'header-extent-flags-ignored',
    file: 'include/napi_dlpack.h',
    find: 'int padded = (flags & (1ULL << 2)) != 0;',
    replace: 'int padded = (flags & 0) != 0;',
  },
  {
    id: 'header-extent-lanes-unchecked',
    file: 'include/napi_dlpack.h',
    find: '  if (dtype.lanes != 1) return 0;\n',
    replace: '',
  },
  {
    id: 'header-extent-device-unchecked',
    file: 'include/napi_dlpack.h',
    find: 'if (!napi_dlpack_device_type_known((int32_t)t->device.device_type) ||\n      t->device.device_id < 0)',
    replace: 'if (0)',
  },
  {
    id: 'header-extent-alignment-unchecked',
    file: 'include/napi_dlpack.h',
    find: 'if ((uintptr_t)t->shape % offsetof(napi_dlpack_i64_align_probe_, v) != 0)',
    replace: 'if (0)',
  },
  {
    id: 'header-extent-stride-reach-unchecked',
    file: 'include/napi_dlpack.h',
    find: 'if (!napi_dlpack_mul_i64_(t->shape[i] - 1, t->strides[i], &reach))\n          return "ERR_DLPACK_OVERFLOW";',
    replace: 'reach = (int64_t)((uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i]);',
  },
  {
    id: 'header-extent-address-below-zero-accepted',
    file: 'include/napi_dlpack.h',
    find: 'if (first < below || from_first > (uint64_t)UINTPTR_MAX - first)',
    replace: 'if (from_first > (uint64_t)UINTPTR_MAX - first)',
  },
  {
    id: 'header-extent-address-past-end-accepted',
    file: 'include/napi_dlpack.h',
    find: 'if (first < below || from_first > (uint64_t)UINTPTR_MAX - first)',
    replace: 'if (first < below || (from_first > (uint64_t)UINTPTR_MAX - first && 0))',
  },
  {
    id: 'header-extent-size1-stride-read',
    file: 'include/napi_dlpack.h',
    find: '        if (t->shape[i] == 1) continue;\n',
    replace: '',
  },
  // src/exchange.rs: a borrow says what its memory holds (sub-byte elements padded to a byte)
  {
    id: 'exchange-subbyte-flag-dropped',
    file: `${addon}/handle.rs`,
    find: '  } | if layout.dtype.is_subbyte() {',
    replace: '  } | if false {',
    crate: null,
    js: ['__test__/abi/exchange.spec.ts', '__test__/abi/typed-args.spec.ts'],
  },
  // src/slots/: a handle id names one tensor of one thread (docs/protocol.md §5.6)
  {
    id: 'handle-id-generation-unchecked',
    file: `${addon}/slots/mod.rs`,
    find: '  if slot.generation.load(Ordering::Relaxed) != (id >> INDEX_BITS) as u32 {',
    replace: '  if false && slot.generation.load(Ordering::Relaxed) != (id >> INDEX_BITS) as u32 {',
    crate: addonCrate,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    id: 'handle-id-thread-unchecked',
    file: `${addon}/slots/mod.rs`,
    find: '  if slot.owner.load(Ordering::Acquire) != thread_key::current() {\n    return Err(Refused::OtherThread);',
    replace: '  if false {\n    return Err(Refused::OtherThread);',
    crate: addonCrate,
    js: ['__test__/threads/handle-ids-workers.spec.ts'],
  },
  {
    // borrow_id's hot path hands out the slot's record: it must pin the slot, or a dispose()
    // during the borrow frees the memory under the borrower.
    id: 'borrow-id-unpinned',
    file: `${addon}/exchange.rs`,
    find: '      unsafe { slots::pin(slot) };\n      return slot.lent();',
    replace: '      return slot.lent();',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    // Releasing a borrow by id must unpin, or the slot (and its memory) is never freed.
    id: 'release-by-id-keeps-pin',
    file: `${addon}/slots/mod.rs`,
    find: '  state.shared.pins -= 1;\n  !(state.shared.pins == 0 && state.shared.released != 0)',
    replace: '  !(state.shared.pins == 1 && state.shared.released != 0)',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  // crates/napi-dlpack/src/node/id_slots.rs: a consumer's inline borrow by id makes the
  // producer's checks itself
  {
    id: 'inline-borrow-owner-unchecked',
    file: `${crate}/node/id_slots.rs`,
    find: '  if head.owner.load(Ordering::Acquire) != thread_key::current() {\n    return None;',
    replace: '  if false {\n    return None;',
    crate: null,
    js: ['__test__/threads/handle-ids-workers.spec.ts'],
  },
  {
    id: 'inline-borrow-generation-unchecked',
    file: `${crate}/node/id_slots.rs`,
    find: '  if head.generation.load(Ordering::Relaxed) != generation as u32 {\n    return None;',
    replace: '  if false {\n    return None;',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    // `ready` off: the producer still has a step to do (JS memory not yet marked untransferable).
    id: 'inline-borrow-ready-unchecked',
    file: `${crate}/node/id_slots.rs`,
    find: '    if (*shared).ready == 0 {\n      return None;',
    replace: '    if false {\n      return None;',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    // The last pin of a tensor that let go during the borrow must go back to the producer.
    id: 'inline-release-ignores-released',
    file: `${crate}/node/id_slots.rs`,
    find: '    if (*shared).released != 0 && pins <= 1 {\n      return false;',
    replace: '    if false {\n      return false;',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    // What a consumer derived from a slot's previous tensor must not be read for the next one.
    id: 'slot-scratch-kept-on-reuse',
    file: `${addon}/slots/mod.rs`,
    find: '  state.shared.scratch_key = 0;',
    replace: '',
    crate: null,
    js: ['__test__/abi/handle-ids.spec.ts'],
  },
  {
    // A thread key can be a thread pointer, which a later thread reuses: an ended thread's live
    // slots must not stay under its key.
    id: 'handle-id-ended-thread-keeps-slots',
    file: `${addon}/slots/mod.rs`,
    find: '          slot.owner.store(thread_key::ENDED, Ordering::Release);',
    replace: '          let _ = thread_key::ENDED;',
    crate: addonCrate,
  },
  // hot.rs: a hot function's failures reach JS as thrown, coded errors (never a silent
  // `undefined` after a refused argument, an error of the body, or a panic)
  {
    id: 'hot-argument-error-not-thrown',
    file: `${crate}/node/hot.rs`,
    find: '        unsafe { error.throw(env) };\n        return ptr::null_mut();',
    replace: '        let _ = error;\n        return ptr::null_mut();',
    crate: null,
    js: ['__test__/abi/hot-calls.spec.ts'],
  },
  {
    id: 'hot-body-error-not-thrown',
    file: `${crate}/node/hot.rs`,
    find: '        unsafe { error.throw(env) };\n        ptr::null_mut()\n      }\n    }\n  }));',
    replace: '        let _ = error;\n        ptr::null_mut()\n      }\n    }\n  }));',
    crate: null,
    js: ['__test__/abi/hot-calls.spec.ts'],
  },
  {
    id: 'hot-panic-not-thrown',
    file: `${crate}/node/hot.rs`,
    find: '        unsafe { error.throw(env) }\n      }));',
    replace: '        let _ = error;\n      }));',
    crate: null,
    js: ['__test__/abi/hot-calls.spec.ts'],
  },
  // arg/: what reading a typed argument threw keeps a code, and the user's exception as cause
  {
    id: 'arg-getter-exception-lost-to-status',
    file: `${crate}/node/arg/by_table.rs`,
    find: 'if let Some(found) = unsafe { coded_lookup(env, exchange::find_in_object(env, value))? } {',
    replace: 'if let Some(found) = unsafe { coded(env, exchange::find_in_object(env, value))? } {',
    crate: null,
    js: ['__test__/core/hostile-input.spec.ts'],
  },
  {
    id: 'arg-uncoded-exception-passed-without-code',
    file: `${crate}/node/arg/errors.rs`,
    find: 'if unsafe { has_string_code(env, exception) } {',
    replace: 'if unsafe { has_string_code(env, exception) } || exception != ptr::null_mut() {',
    crate: null,
    js: ['__test__/core/hostile-input.spec.ts'],
  },
  // The addon: JS memory wrapped in place, host copies of foreign spans, import negotiation
  {
    // The addon's call of the crate's fits-in check, for JS memory wrapped in place.
    id: 'addon-region-bounds-removed',
    file: `${addon}/layout.rs`,
    find: 'checked.check_fits_in(first_byte, len)?;',
    replace: '',
    crate: addonCrate,
  },
  {
    id: 'addon-alignment-ignored',
    file: `${addon}/layout.rs`,
    find: 'address.is_multiple_of(dtype.itemsize().min(8))',
    replace: 'true',
    crate: addonCrate,
  },
  {
    id: 'addon-foreign-span-start-at-first-element',
    file: `${addon}/storage.rs`,
    find: '.wrapping_sub(checked.first_element() - checked.span_start())',
    replace: '.wrapping_sub(0)',
    crate: addonCrate,
  },
  {
    id: 'addon-misaligned-foreign-memory-viewed',
    file: `${addon}/ops/negotiation.rs`,
    find: 'if !copy && aligned && runtime.external_buffers {',
    replace: 'if !copy && runtime.external_buffers {',
    crate: addonCrate,
  },
  {
    id: 'addon-too-large-host-tensor-copied',
    file: `${addon}/ops/negotiation.rs`,
    find: 'if span_bytes > runtime.max_arraybuffer_bytes {',
    replace: 'if false {',
    crate: addonCrate,
  },
  {
    // A capsule over V8 memory left transferable: a transfer list moves the memory away while
    // the capsule points into it (tensor.spec.ts: "an exported tensor keeps its ArrayBuffer").
    id: 'addon-exported-buffer-transferable',
    file: `${addon}/ops/export.rs`,
    find: 'storage.pin_for_export(env)?;',
    replace: 'storage.check_attached(env)?;',
    crate: null,
    js: ['__test__/core/tensor.spec.ts'],
  },
  {
    // dispose() detaches and releases a view of foreign memory that another tensor exported:
    // the producer's deleter runs under the export (Node 24: an abort in the detach).
    id: 'dispose-releases-exported-view',
    file: `${addon}/handle.rs`,
    find: 'if !unsafe { js_memory::was_exported(env.raw(), value) } {',
    replace: 'if true {',
    crate: null,
    js: ['__test__/core/external-buffers.spec.ts'],
  },
  {
    // A resizable ArrayBuffer wrapped in place: resize() then takes the memory away under the
    // tensor, its capsules and typed arguments (a segfault, or stale values).
    id: 'addon-resizable-buffer-wrapped-in-place',
    file: `${addon}/ops/import.rs`,
    find: 'if resizable || !is_aligned(base as usize + first_byte, dtype) {',
    replace: 'if !is_aligned(base as usize + first_byte, dtype) {',
    crate: null,
    js: ['__test__/core/resizable.spec.ts'],
  },
  {
    // An empty tensor starting past the end of its buffer: views of it throw RangeErrors.
    id: 'addon-empty-tensor-past-buffer-end',
    file: `${addon}/layout.rs`,
    find: 'if first_byte > len {',
    replace: 'if false {',
    crate: addonCrate,
    js: ['__test__/core/hostile-input.spec.ts'],
  },
  {
    id: 'addon-requested-device-ignored',
    file: `${addon}/ops/negotiation.rs`,
    find: 'Some(wanted) if wanted != actual => Err(fail(',
    replace: 'Some(wanted) if false && wanted != actual => Err(fail(',
    crate: addonCrate,
  },
  // Views (docs/views.md): the region check every view passes (src/layout.rs
  // `TensorLayout::view`), whatever the arithmetic of napi_dlpack::view_layout gave.
  {
    id: 'addon-view-region-bounds-removed',
    file: `${addon}/layout.rs`,
    find: 'checked.check_fits_in(first_byte, region_len)?;',
    replace: '',
    crate: addonCrate,
  },
  {
    // An empty view whose first element lies past the region (its export's data pointer would
    // point outside the memory).
    id: 'addon-view-first-element-past-region',
    file: `${addon}/layout.rs`,
    find: '.filter(|byte| *byte <= region_len)',
    replace: '',
    crate: addonCrate,
  },
  {
    // A view of foreign memory exported at the producer's first element instead of its own.
    id: 'addon-view-foreign-export-at-producer-first-element',
    file: `${addon}/storage.rs`,
    find: 'self.base().wrapping_add(layout.first_byte).cast::<c_void>(),',
    replace: 'tensor.data_ptr().cast::<c_void>(),',
    crate: null,
    js: ['__test__/core/views.spec.ts'],
  },
  {
    // An expanded view (stride 0) left writable.
    id: 'view-expand-broadcast-writable',
    file: `${crate}/view_layout.rs`,
    find: 'view.broadcasts |= stride == 0 && size > 1;',
    replace: '',
  },
  {
    id: 'view-expand-non-one-dimension-repeated',
    file: `${crate}/view_layout.rs`,
    find: 'Some((1, _)) if target >= 0 => (target, 0),',
    replace: 'Some((_, _)) if target >= 0 => (target, 0),',
  },
  {
    id: 'view-narrow-past-the-end',
    file: `${crate}/view_layout.rs`,
    find: 'if first < 0 || first > size || length < 0 || length > size - first {',
    replace: 'if first < 0 || first > size || length < 0 {',
  },
  {
    // reshape merging dimensions that are not one contiguous run.
    id: 'view-reshape-across-runs',
    file: `${crate}/view_layout.rs`,
    find: '&& Some(strides[tensor_d - 1]) != tensor_numel.checked_mul(chunk_base_stride));',
    replace: '&& false);',
  },
  // The Python bridge's glue (examples/python-bridge/bridge.c): the rename that hands a
  // PyCapsule's tensor over, the destructor's "used_" check, claimed tokens, major versions.
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-put-skips-rename', find: 'if (PyCapsule_SetName(capsule, used_name) != 0) {', replace: 'if (used_name == NULL) {' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-put-renames-before-table', find: '  status = table_put(kind, tensor, &token);\n  if (status != TABLE_OK) {', replace: '  (void)PyCapsule_SetName(capsule, used_name);\n  status = table_put(kind, tensor, &token);\n  if (status != TABLE_OK) {' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-exhausted-table-reuses-tokens', find: 'if (g_next_token >= BRIDGE_MAX_TOKEN) {', replace: 'if (g_next_token >= BRIDGE_MAX_TOKEN + 2) {' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-legacy-wrapper-skips-inner-deleter', find: '  free(wrapper);\n  if (inner->deleter != NULL) inner->deleter(inner);', replace: '  free(wrapper);\n  (void)inner;' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-legacy-drops-read-only', find: '  if ((inner->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {', replace: '  if (0) {' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-legacy-keeps-versioned-owner', find: '  if (PyCapsule_SetName(capsule, kVersionedUsedName) != 0) {\n    free(wrapper);', replace: '  if (0) {\n    free(wrapper);' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-destructor-ignores-used-name', find: '  if (PyCapsule_IsValid(capsule, kVersionedUsedName) ||\n      PyCapsule_IsValid(capsule, kLegacyUsedName))\n    return;', replace: '' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-take-keeps-entry', find: '      *link = found->next;\n      g_pending--;', replace: '      g_pending--;' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-to-python-accepts-other-major', find: '  if (!major_understood(kind, tensor)) {\n    napi_dlpack_tensor_release(kind, tensor);\n    return js_throw_status(env, NAPI_DLPACK_ERR_VERSION,', replace: '  if (0) {\n    napi_dlpack_tensor_release(kind, tensor);\n    return js_throw_status(env, NAPI_DLPACK_ERR_VERSION,' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-from-python-leaks-on-failure', find: '    /* On failure ownership stayed with us (the header\'s contract). */\n    napi_dlpack_tensor_release(kind, tensor);', replace: '' , note: 'only reachable when napi_create_external fails: expected to survive' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-table-taken-reported-unknown', find: 'status = token != 0 && token < g_next_token ? TABLE_TAKEN : TABLE_UNKNOWN;', replace: 'status = TABLE_UNKNOWN;' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-js-token-upper-bound-dropped', find: '!(value >= 0 && value < 9007199254740992.0)', replace: '!(value >= 0 && value < 1e300)' },
  { file: bridgeSource, crate: null, bridge: true, id: 'bridge-py-float-token-refused', find: '  if (PyFloat_Check(arg)) {\n    double number', replace: '  if (0) {\n    double number' },
  // crates/napi-dlpack/src/cuda/staging.rs: the pinned staging pipeline's ordering (killed by
  // __test__/cuda/staging.spec.ts against the fake CUDA driver's deferred streams)
  {
    id: 'staging-upload-skips-chunk-wait',
    file: `${crate}/cuda/staging.rs`,
    find: '      self.settle(bound, index)?;\n      fill(offset, self.chunk_bytes(index, bytes))?;',
    replace: '      fill(offset, self.chunk_bytes(index, bytes))?;',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'staging-download-reads-before-wait',
    file: `${crate}/cuda/staging.rs`,
    find: '      self.settle(bound, index)?;\n      let (offset, bytes) = span(k);',
    replace: '      let (offset, bytes) = span(k);',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'staging-event-recorded-before-dma',
    file: `${crate}/cuda/staging.rs`,
    // The event recorded before the piece's DMA is enqueued: waiting for it does not wait for
    // that DMA.
    find: '      self.settle(bound, index)?;\n      fill(offset, self.chunk_bytes(index, bytes))?;',
    replace: '      self.settle(bound, index)?;\n      self.record(bound, index)?;\n      fill(offset, self.chunk_bytes(index, bytes))?;\n      if true {\n        check("", unsafe { (bound.driver.memcpy_htod_async)(dst + offset as u64, self.chunks[index].host.cast(), bytes, LEGACY_STREAM) })?;\n        offset += bytes;\n        continue;\n      }',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'staging-recovery-without-stream-sync',
    file: `${crate}/cuda/staging.rs`,
    find: '    let code = unsafe { (bound.driver.stream_synchronize)(LEGACY_STREAM) };\n    if code != CUDA_SUCCESS {\n      return false;',
    replace: '    let code = CUDA_SUCCESS;\n    if code != CUDA_SUCCESS {\n      return false;',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'staging-retries-pinned-alloc-every-copy',
    file: `${crate}/cuda/staging.rs`,
    find: '        Err(_) => StagingState::Failed,',
    replace: '        Err(_) => StagingState::Empty,',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    // A device reset frees the chunks: writing into them again crashes the process (the fake
    // unmaps them).
    id: 'staging-reset-unnoticed',
    file: `${crate}/cuda/staging.rs`,
    find: '      if !pool.intact(&bound)? {',
    replace: '      if false && !pool.intact(&bound)? {',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  {
    // The strided gather into the chunks: a run's outer indices decoded in the wrong order.
    id: 'staging-row-runs-outer-index-order',
    file: `${addon}/storage.rs`,
    find: '      for dim in (0..self.axis).rev() {',
    replace: '      for dim in 0..self.axis {',
    crate: addonCrate,
  },
  {
    id: 'staging-kept-after-last-environment',
    file: `${addon}/js_memory/env.rs`,
    find: '  cuda::staging_env_ended();',
    replace: '',
    crate: null,
    js: ['__test__/cuda/staging.spec.ts'],
    fakeCuda: true,
  },
  // Pinned host tensors (cuda_host): freed exactly once, exported as kDLCUDAHost, uploads that
  // wait for the DMA out of pinned memory, no silent copies of pinned memory in Electron.
  {
    id: 'pinned-free-skipped',
    file: `${crate}/cuda/pinned.rs`,
    find: '    if self.allocated {',
    replace: '    if false && self.allocated {',
    crate: null,
    js: ['__test__/cuda/pinned.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'pinned-freed-twice',
    file: `${crate}/cuda/pinned.rs`,
    find: 'let code = unsafe { (bound.driver.mem_free_host)(ptr) };',
    replace: 'let code = unsafe { (bound.driver.mem_free_host)(ptr); (bound.driver.mem_free_host)(ptr) };',
    crate: null,
    js: ['__test__/cuda/pinned.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'pinned-tensor-claims-cpu',
    file: `${addon}/cuda.rs`,
    find: 'let layout = TensorLayout::row_major(dtype, shape, CUDA_HOST)?;',
    replace: 'let layout = TensorLayout::row_major(dtype, shape, Device::CPU)?;',
    crate: null,
    js: ['__test__/cuda/pinned.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'pinned-upload-not-awaited',
    file: `${addon}/ops/copy.rs`,
    find: '  if !matches!(storage.memory(), Memory::Js { .. }) {',
    replace: '  if matches!(storage.memory(), Memory::Foreign(_)) {',
    crate: null,
    js: ['__test__/cuda/pinned.spec.ts'],
    fakeCuda: true,
  },
  {
    id: 'pinned-window-copied-in-electron',
    file: `${addon}/ops/view.rs`,
    find: '  if matches!(storage.memory(), Memory::Pinned(_)) {\n    refuse_pinned_copy(env)?;\n  }',
    replace: '',
    crate: null,
    js: ['__test__/cuda/pinned.spec.ts'],
    fakeCuda: true,
    env: { NAPI_DLPACK_NO_EXTERNAL_BUFFERS: '1' },
  },
  {
    id: 'pinned-own-export-copied-in-electron',
    file: `${addon}/ops/negotiation.rs`,
    find: 'js_memory || pinned || !device.is_host_accessible()',
    replace: 'js_memory || !device.is_host_accessible()',
    crate: addonCrate,
  },
  {
    id: 'pinned-export-as-cpu-keeps-cuda-host',
    file: `${addon}/ops/negotiation.rs`,
    find: 'device: if pinned_as_cpu { Device::CPU } else { device },',
    replace: 'device,',
    crate: addonCrate,
  },
  // src/ops/copy.rs: copies into an existing tensor (Tensor#copy_, to(device, { out }))
  {
    id: 'copy-into-read-only',
    file: `${addon}/ops/copy.rs`,
    find: '  if dst_layout.read_only {\n    return Err(fail(ErrorKind::ReadOnly, "the destination is read-only"));',
    replace: '  if false && dst_layout.read_only {\n    return Err(fail(ErrorKind::ReadOnly, "the destination is read-only"));',
    crate: null,
    js: ['__test__/cuda/copies.spec.ts'],
  },
  {
    id: 'copy-into-shape-unchecked',
    file: `${addon}/ops/copy.rs`,
    find: '  if dst_layout.shape != src_layout.shape {',
    replace: '  if false && dst_layout.shape != src_layout.shape {',
    crate: null,
    js: ['__test__/cuda/copies.spec.ts'],
  },
  {
    id: 'copy-into-strided-destination',
    file: `${addon}/ops/copy.rs`,
    find: '  if !dst_layout.contiguous {\n    return Err(fail(\n      ErrorKind::NotContiguous,',
    replace: '  if false && !dst_layout.contiguous {\n    return Err(fail(\n      ErrorKind::NotContiguous,',
    crate: null,
    js: ['__test__/cuda/copies.spec.ts'],
  },

]

// ---------------------------------------------------------------------------------------------

const args = process.argv.slice(2)
if (args.includes('--list')) {
  for (const m of mutants) console.log(`${m.id.padEnd(40)} ${m.file}${m.js ? '  (+ JS)' : ''}`)
  process.exit(0)
}
const words = args.filter((a) => !a.startsWith('--'))
const selected = words.length ? mutants.filter((m) => words.some((w) => m.id.includes(w))) : mutants
if (selected.length === 0) {
  console.error(`no mutant matches ${words.join(', ')}`)
  process.exit(2)
}

// Every snippet must be present exactly once, or the mutant no longer mutates anything.
for (const m of selected) {
  const source = readFileSync(join(root, m.file), 'utf8')
  const hits = source.split(m.find).length - 1
  if (hits !== 1) {
    console.error(`mutant ${m.id}: its snippet occurs ${hits} times in ${m.file} (the code changed: update the mutant)`)
    process.exit(2)
  }
}
// `--check`: only that every mutant still mutates something (cheap; `npm test` runs it, so a
// refactoring that moves a guarded snippet fails at once instead of at the next mutation run).
if (args.includes('--check')) {
  console.log(`${selected.length} mutants: every snippet found exactly once`)
  process.exit(0)
}

/** Runs a command in the scratch copy; returns whether it exited 0. Output goes to `log`. */
function run(cwd, cmd, cmdArgs, { env = {}, timeoutSeconds = 900, log } = {}) {
  const result = spawnSync(cmd, cmdArgs, {
    cwd,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    timeout: timeoutSeconds * 1000,
    killSignal: 'SIGKILL',
  })
  if (log) writeFileSync(log, `$ ${cmd} ${cmdArgs.join(' ')}\n${result.stdout ?? ''}\n${result.stderr ?? ''}\n`, { flag: 'a' })
  return result.status === 0
}

// The scratch copy: tracked and untracked-but-not-ignored files, plus links to node_modules
// and to the persistent build directory.
const listed = spawnSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' })
if (listed.status !== 0) {
  console.error('git ls-files failed: run this inside the repository')
  process.exit(2)
}
const scratch = mkdtempSync(join(tmpdir(), 'napi-dlpack-mutants-'))
for (const file of listed.stdout.split('\0').filter(Boolean)) {
  const from = join(root, file)
  if (!existsSync(from)) continue // deleted in the working tree
  mkdirSync(dirname(join(scratch, file)), { recursive: true })
  cpSync(from, join(scratch, file))
}
const buildDir = join(root, 'target', 'mutants')
if (!existsSync(buildDir)) {
  mkdirSync(buildDir, { recursive: true })
  // Seed with the working tree's builds: the dependencies are then already compiled.
  for (const dir of ['debug', 'release', 'consumer-addon']) {
    if (existsSync(join(root, 'target', dir))) cpSync(join(root, 'target', dir), join(buildDir, dir), { recursive: true })
  }
}
symlinkSync(buildDir, join(scratch, 'target'))
symlinkSync(join(root, 'node_modules'), join(scratch, 'node_modules'))
const logDir = join(buildDir, 'logs')
rmSync(logDir, { recursive: true, force: true })
mkdirSync(logDir, { recursive: true })

const cargoEnv = { CARGO_TARGET_DIR: buildDir, CARGO_TERM_COLOR: 'never' }
/** The JS specs' environment of mutant `m` (see `env` and `fakeCuda` above). */
function jsEnv(m) {
  if (!m.fakeCuda) return m.env ?? {}
  const fakeDir = join(root, 'target', 'fake-cuda')
  const others = (process.env.LD_LIBRARY_PATH ?? '').split(':').filter((dir) => dir && dir !== fakeDir)
  return { LD_LIBRARY_PATH: [fakeDir, ...others].join(':'), FAKE_CUDA_DEVICE_COUNT: '2', NAPI_DLPACK_CUDA_EXPECT: 'fake', ...m.env }
}
/** The core crate's unit and integration tests (debug build). A mutant that does not compile
 * is not killed by them: it is reported as a build failure. */
function crateTests(log, crateName = 'napi-dlpack') {
  const testArgs = ['test', '-p', crateName, '--lib', '--tests']
  if (!run(scratch, 'cargo', [...testArgs, '--no-run'], { env: cargoEnv, log })) return { built: false, killed: false }
  return { built: true, killed: !run(scratch, 'cargo', testArgs, { env: cargoEnv, log }) }
}
const napiCli = join(scratch, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const ava = join(scratch, 'node_modules', 'ava', 'entrypoints', 'cli.mjs')
/** The specs of the plain C addon's exchange with napi-dlpack, by topic (import, export, deleters, ...). */
const cAddonSpecs = readdirSync(join(root, '__test__', 'abi'))
  .filter((name) => name.startsWith('c-addon-') && name.endsWith('.spec.ts'))
  .sort()
  .map((name) => join('__test__', 'abi', name))
/** Rebuilds both Rust addons the C-fixture tests use, then runs those tests (stops at the first
 * failure). A build failure counts as not killed: the mutant must compile. */
function jsTests(log, specs = cAddonSpecs, env = {}) {
  const built =
    run(scratch, process.execPath, [napiCli, 'build', '--platform', '--release', '--output-dir', join('lib', 'binding'), '--js', 'index.js', '--dts', 'index.d.ts'], {
      env: cargoEnv,
      log,
    }) &&
    // The mutated addon goes where the scratch copy's dist/loader.js loads it.
    run(scratch, process.execPath, [join(scratch, 'scripts', 'copy-binding.mjs')], { log }) &&
    run(scratch, 'bash', [join(scratch, '__test__', 'native', 'consumer-addon', 'build.sh')], { log })
  if (!built) return { built: false, killed: false }
  const passed = run(scratch, process.execPath, [ava, '--fail-fast', ...specs], { env, timeoutSeconds: 600, log })
  return { built: true, killed: !passed }
}

/** The Python bridge's glue compiled from the scratch copy's (mutated) bridge.c as a .node of
 * its own, with the flags its build.sh recorded, then its suite run against that build
 * (NAPI_DLPACK_BRIDGE_NATIVE). A mutant that does not compile is not killed. */
function bridgeTests(log, name) {
  const example = join(root, 'examples', 'python-bridge')
  const config = join(example, 'build', 'config.json')
  if (!existsSync(config)) throw new Error(`the Python bridge is not built: run bash examples/python-bridge/build.sh first`)
  const { pythonConfig, nodedir } = JSON.parse(readFileSync(config, 'utf8'))
  const flags = (what) => spawnSync(pythonConfig, what, { encoding: 'utf8' }).stdout.trim().split(/\s+/).filter(Boolean)
  const out = join(scratch, `bridge-${name}.node`)
  const compiler = process.env.CC || 'cc'
  const built = run(scratch, compiler, ['-O2', '-fPIC', '-shared', '-DNAPI_VERSION=8', ...flags(['--includes']), `-I${join(nodedir, 'include', 'node')}`, `-I${join(scratch, 'include')}`, '-o', out, join(scratch, bridgeSource), ...flags(['--ldflags', '--embed']), '-pthread'], { log })
  if (!built) return { built: false, killed: false }
  const passed = run(example, process.execPath, ['--expose-gc', '--test', join(example, 'test', 'bridge.test.mjs')], {
    env: { NAPI_DLPACK_BRIDGE_NATIVE: out },
    timeoutSeconds: 180,
    log,
  })
  return { built: true, killed: !passed }
}

const started = Date.now()
const seconds = (since) => ((Date.now() - since) / 1000).toFixed(0)
let exitCode = 0
try {
  // The unmutated code must pass everything, or no result below means anything.
  console.log(`scratch copy: ${scratch}\nbuild directory: ${buildDir}\nlogs: ${logDir}\n`)
  console.log('baseline (no mutation): building and testing ...')
  const baselineLog = join(logDir, 'baseline.log')
  if (!run(scratch, 'bash', [join(scratch, '__test__', 'native', 'c-addon', 'build.sh')], { log: baselineLog }) || !existsSync(join(root, 'dist'))) {
    throw new Error(`building the C fixture failed, or dist/ is missing (run node scripts/ensure-built.mjs): see ${baselineLog}`)
  }
  cpSync(join(root, 'dist'), join(scratch, 'dist'), { recursive: true })
  for (const crateName of new Set(selected.map((m) => m.crate).filter((name) => name !== null))) {
    const baselineCrate = crateTests(baselineLog, crateName)
    if (!baselineCrate.built || baselineCrate.killed) throw new Error(`the crate tests fail without any mutation: see ${baselineLog}`)
  }
  // c-addon-*.spec.ts when a mutant needs it, and each mutant's own spec list (in its environment).
  if (selected.some((m) => m.fakeCuda)) {
    run(root, 'bash', [join(root, '__test__', 'native', 'fake-cuda', 'build.sh')], { log: baselineLog })
  }
  const specLists = [
    ...(selected.some((m) => m.js === true) ? [undefined] : []),
    ...new Set(selected.filter((m) => Array.isArray(m.js)).map((m) => JSON.stringify([m.js, jsEnv(m)]))),
  ]
  for (const list of specLists) {
    const [specs, env] = list === undefined ? [undefined, {}] : JSON.parse(list)
    const baseline = jsTests(baselineLog, specs, env)
    if (!baseline.built || baseline.killed) throw new Error(`the JS tests fail without any mutation: see ${baselineLog}`)
  }
  if (selected.some((m) => m.bridge)) {
    const baseline = bridgeTests(baselineLog, 'baseline')
    if (!baseline.built || baseline.killed) throw new Error(`the Python bridge's suite fails without any mutation: see ${baselineLog}`)
  }
  console.log(`baseline passes (${seconds(started)} s)\n`)

  const rows = []
  for (const m of selected) {
    const t0 = Date.now()
    const path = join(scratch, m.file)
    const original = readFileSync(path, 'utf8')
    writeFileSync(path, original.replace(m.find, m.replace))
    const log = join(logDir, `${m.id}.log`)
    let crate, js
    try {
      crate = m.crate === null ? undefined : crateTests(log, m.crate)
      js = m.bridge ? bridgeTests(log, m.id) : m.js ? jsTests(log, Array.isArray(m.js) ? m.js : undefined, jsEnv(m)) : undefined
    } finally {
      writeFileSync(path, original)
    }
    const column = (step) => (step === undefined ? '-' : !step.built ? 'BUILD FAILED' : step.killed ? 'killed' : 'SURVIVED')
    const killed = (crate === undefined || crate.killed) && (js === undefined || js.killed) && (crate ?? js) !== undefined
    // A survivor with a note is expected (the note says why); it does not fail the run.
    const verdict = killed ? 'killed' : m.note ? `survived (expected: ${m.note})` : 'SURVIVED'
    rows.push({ id: m.id, crate: column(crate), js: column(js), verdict, time: `${seconds(t0)} s` })
    console.log(`${rows.at(-1).verdict.padEnd(8)} ${m.id} (crate: ${rows.at(-1).crate}, JS: ${rows.at(-1).js}, ${seconds(t0)} s)`)
  }
  // Rebuild the scratch copy's addon unmutated, so nothing mutated is left in the build directory.
  if (selected.some((m) => m.js || m.crate !== null)) jsTests(join(logDir, 'restore.log'))

  console.log('\n| mutant | crate tests | JS (c-addon-*.spec.ts, or its own specs) | verdict | time |\n| --- | --- | --- | --- | --- |')
  for (const r of rows) console.log(`| ${r.id} | ${r.crate} | ${r.js} | ${r.verdict} | ${r.time} |`)
  const survivors = rows.filter((r) => r.verdict === 'SURVIVED')
  const expected = rows.filter((r) => r.verdict.startsWith('survived')).length
  const killedCount = rows.length - survivors.length - expected
  console.log(`\n${killedCount} of ${rows.length} mutants killed, ${survivors.length} survived${expected ? `, ${expected} survived as expected (see their notes)` : ''} (${seconds(started)} s in all)`)
  if (survivors.length) exitCode = 1
} catch (error) {
  console.error(String(error?.message ?? error))
  exitCode = 2
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
process.exit(exitCode)
