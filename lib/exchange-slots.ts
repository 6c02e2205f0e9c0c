/**
 * The two keys under which native code reaches a `Tensor`'s handle: the exchange table's
 * (src/exchange.rs, installed by lib/exchange.ts; a getter on `Tensor.prototype`, see the class)
 * and the per-tensor shadow of the table under `EXCHANGE_API_PROPERTY` (docs/protocol.md §5.2),
 * an own property of each lending tensor, filled when it is made and removed by `dispose()`.
 * Apart from lib/tensor.ts (the class) so that the modules reading the keys (lib/exchange.ts,
 * lib/protocol.ts) need not import the class for them.
 */
import { EXCHANGE_API_SYMBOL_NAME } from './generated/facts'

/**
 * @internal The key under which the exchange table (src/exchange.rs, installed by
 * lib/exchange.ts) reads a `Tensor`'s native handle: a getter on `Tensor.prototype` (see the
 * class), undefined once the tensor is disposed and for any object that is not a `Tensor`.
 */
export const exchangeHandle = Symbol('napi-dlpack.exchangeHandle')

/**
 * The property descriptor of a lending tensor's exchange slot, reused (its `value` set for one
 * call, then cleared) so that a tensor costs no descriptor object. It is non-enumerable, so
 * `Object.assign({}, t)` and spreads do not copy it; read-only (a consumer's lookup lands on it:
 * `t[EXCHANGE_API_PROPERTY] = x` must not make a live tensor unborrowable or lend other memory);
 * and configurable, so that `dispose()` deletes it.
 */
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

/**
 * Fills a new lending tensor's exchange slot with its native handle: it shadows the prototype's
 * table with the handle itself (docs/protocol.md §5.2). Nothing for a tensor that does not lend
 * (an adopted capsule): the table reads its handle through the prototype's getter.
 */
export function fillSlots(tensor: object, handle: unknown, lendable: boolean): void {
  if (lendable) defineSlot(tensor, EXCHANGE_API_PROPERTY, exchangeSlot, handle)
}

/** Empties a disposed tensor's exchange slot. */
export function clearSlots(tensor: object, lendable: boolean): void {
  // Consumers then reach the prototype's table, which reports the tensor disposed.
  if (lendable) delete (tensor as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
}
