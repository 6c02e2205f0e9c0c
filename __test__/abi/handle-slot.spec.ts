// Where the exchange table (src/exchange.rs `tensor_handle`) reads a Tensor's native handle: a
// getter on Tensor.prototype under a private symbol, not an own property of each tensor. Tensors
// whose handle is an adopted capsule (our own capsule straight back: `fromDLPack(t.__dlpack__())`)
// lend only through it. An own slot cost an Object.defineProperty per tensor (about 2,400
// instructions, most of the capsule round trip's rise; CHANGELOG) and, being writable, let JS
// swap the handle under a live tensor, so that the table lent another tensor's memory.
import test from 'ava'

import { Tensor, fromDLPack } from '../../dist/index.js'
import { codeOf, nativeFixture } from '../harness/helpers.js'

interface ExchangeC {
  borrowSum(value: unknown): { sum: number; pointer: bigint }
  lendingPath(value: unknown): string
}

const { addon: c } = nativeFixture<ExchangeC>('exchange-c', 'exchange_c.node')

/**
 * The private key the table reads, found as any JS code can find it: on the prototype, or (the
 * layout before, kept so the swap test shows what it caught) among a tensor's own symbols.
 */
function handleKey(tensor: object = Tensor.prototype): symbol {
  const named = (from: object) => Object.getOwnPropertySymbols(from).find((s) => s.description === 'napi-dlpack.exchangeHandle')
  const key = named(Tensor.prototype) ?? named(tensor)
  if (key === undefined) throw new Error('no handle key on Tensor.prototype or the tensor')
  return key
}

const roundTrip = (values: number[]) => fromDLPack(Tensor.from(new Float32Array(values)).__dlpack__())

test('a tensor keeps no own handle slot: an adopted capsule lends through the prototype getter', (t) => {
  const adopted = roundTrip([3, 4])
  t.deepEqual(Object.getOwnPropertySymbols(adopted), [], 'no own symbol at all on an adopted tensor')
  t.deepEqual(Object.getOwnPropertySymbols({ ...adopted }), [], 'a spread copies no handle')
  const descriptor = Object.getOwnPropertyDescriptor(Tensor.prototype, handleKey())
  t.is(typeof descriptor?.get, 'function')
  t.is(descriptor?.set, undefined, 'no setter')
  t.false(descriptor?.enumerable)
  t.is(c.lendingPath(adopted), 'table')
  t.is(c.borrowSum(adopted).sum, 7)
  t.is(c.borrowSum(fromDLPack(adopted)).sum, 7, 'a tensor sharing the adopted handle lends it too')
  adopted.dispose()
  t.is(codeOf(() => c.borrowSum(adopted)), 'ERR_TENSOR_DISPOSED', 'undefined once disposed')
  // The getter answers undefined (no TypeError of a private-field read) for other receivers.
  t.is((Object.create(Tensor.prototype) as Record<symbol, unknown>)[handleKey()], undefined)
  t.is(codeOf(() => c.borrowSum(Object.create(Tensor.prototype))), 'ERR_TENSOR_DISPOSED')
})

test('the handle the table reads cannot be swapped from JS: writing it throws, the tensor lends its own memory', (t) => {
  const adopted = roundTrip([3, 4])
  const other = roundTrip([10, 20])
  const key = handleKey(adopted)
  const pointer = c.borrowSum(adopted).pointer
  t.throws(
    () => {
      ;(adopted as unknown as Record<symbol, unknown>)[key] = (other as unknown as Record<symbol, unknown>)[key]
    },
    { instanceOf: TypeError },
  )
  const borrowed = c.borrowSum(adopted)
  t.is(borrowed.sum, 7, 'still its own values')
  t.is(borrowed.pointer, pointer, 'still its own memory')
  t.not(borrowed.pointer, c.borrowSum(other).pointer)
})
