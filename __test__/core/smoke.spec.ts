import test from 'ava'

import { Tensor, fromDLPack } from '../../dist/index.js'

test('round trip through a capsule shares memory', (t) => {
  const source = Tensor.from(new Float32Array([1, 2, 3]))
  const back = fromDLPack(source.__dlpack__())
  t.is(back.dataPointer, source.dataPointer)
  back.data[1] = 7
  t.is(source.data[1], 7)
})
