/**
 * The two property slots through which native code reaches a `Tensor`'s handle: the exchange
 * table's (src/exchange.rs, installed by lib/exchange.ts) and the per-tensor shadow of the table
 * under `EXCHANGE_API_PROPERTY` (docs/protocol.md §5.2). Filled when a tensor is made, emptied
 * by `dispose()`; apart from lib/tensor.ts (the class) so that the modules reading the keys
 * (lib/exchange.ts, lib/protocol.ts) need not import the class for them.
 */
import { EXCHANGE_API_SYMBOL_NAME } from './generated/facts'

/**
 * @internal Where each `Tensor` keeps its native handle for the exchange table (src/exchange.rs,
 * installed by lib/exchange.ts): native consumers borrow the tensor through it. Cleared by
 * `dispose()`.
 */
export const exchangeHandle = Symbol('napi-dlpack.exchangeHandle')

/**
 * The property descriptors of a tensor's two handle slots, reused (their `value` set for one
 * call, then cleared) so that a tensor costs no descriptor objects. Both are non-enumerable, so
 * `Object.assign({}, t)` and spreads copy neither; the exchange slot is also read-only (a
 * consumer's lookup lands on it: `t[EXCHANGE_API_PROPERTY] = x` must not make a live tensor
 * unborrowable or lend other memory) and configurable, so that `dispose()` deletes it.
 */
const handleSlot: PropertyDescriptor = { value: undefined, writable: true, enumerable: false, configurable: false }
const exchangeSlot: PropertyDescriptor = { value: undefined, writable: false, enumerable: false, configurable: true }

function defineSlot(tensor: object, key: symbol, descriptor: PropertyDescriptor, value: unknown): void {
  descriptor.value = value
  Object.defineProperty(tensor, key, descriptor)
  descriptor.value = undefined
}

/**
 * The key under which producers expose their exchange table: the registered symbol
 * `Symbol.for(NAPI_DLPACK_EXCHANGE_API_PROPERTY)`. On `Tensor.prototype` it holds the table; on
 * each lending `Tensor` its own handle, which a native consumer borrows with one lookup
 * (docs/protocol.md §5.2).
 */
export const EXCHANGE_API_PROPERTY: unique symbol = Symbol.for(EXCHANGE_API_SYMBOL_NAME)

/** Fills a new tensor's slots with its native handle (the exchange slot only if `lendable`). */
export function fillSlots(tensor: object, handle: unknown, lendable: boolean): void {
  defineSlot(tensor, exchangeHandle, handleSlot, handle)
  // Shadows the prototype's table with the handle itself (docs/protocol.md §5.2).
  if (lendable) defineSlot(tensor, EXCHANGE_API_PROPERTY, exchangeSlot, handle)
}

/** Empties a disposed tensor's slots. */
export function clearSlots(tensor: object, lendable: boolean): void {
  ;(tensor as Record<symbol, unknown>)[exchangeHandle] = undefined
  // Consumers then reach the prototype's table, which reports the tensor disposed.
  if (lendable) delete (tensor as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
}
