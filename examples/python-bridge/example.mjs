// `node example.mjs` (after `bash install-deps.sh && bash build.sh`, and napi-dlpack built at
// the repository root): a Node process with CPython inside it (node-calls-python) passes a
// tensor to numpy and gets one back, through DLPack, without copying. The data pointers printed
// on both sides are the same.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const bridge = require('./index.js')
// In an application: require('napi-dlpack'); here, the package built at the repository root.
const { Tensor, fromDLPack } = require(join(here, '..', '..', 'dist', 'index.js'))

const py = bridge.loadInterpreter() // node-calls-python, with the interpreter build.sh chose
const app = py.importSync(join(here, 'example.py'))
const hex = (address) => `0x${BigInt(address).toString(16)}`

// 1. Node -> numpy: numpy normalises a Node tensor in place.
const image = Tensor.from(Float32Array.from({ length: 12 }, (_, k) => k * 10), [3, 4])
const seenByNumpy = py.callSync(app, 'normalise', bridge.toPython(image))
console.log(`Node tensor at ${hex(image.dataPointer)}, numpy array at ${hex(seenByNumpy)}`)
console.log(`normalised in place by numpy: ${JSON.stringify(image.toArray()[2].map((v) => +v.toFixed(3)))}`)

// 2. numpy -> Node: a histogram numpy allocated, read in Node where numpy wrote it.
const [token, numpyAddress] = py.callSync(app, 'histogram', bridge.toPython(image), 4)
const counts = fromDLPack(bridge.fromPython(token))
console.log(`numpy array at ${hex(numpyAddress)}, Node tensor at ${hex(counts.dataPointer)}`)
console.log(`histogram (${counts.dtype}): ${JSON.stringify(Array.from(counts.data))}`)
const same = BigInt(seenByNumpy) === image.dataPointer && BigInt(numpyAddress) === counts.dataPointer
counts.dispose() // numpy's deleter runs now: the array is numpy's to free
console.log(same ? 'zero-copy both ways: same addresses' : 'COPIED: the addresses differ')
process.exitCode = same ? 0 : 1
