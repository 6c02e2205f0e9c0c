// Run by bridge.test.mjs in a child process with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1, napi-dlpack's
// Electron mode (V8's memory cage forbids views of foreign memory): numpy -> Node is then a copy
// into V8 memory, and numpy's deleter runs exactly once, at the import; Node -> numpy (JS memory)
// stays zero-copy. Prints one JSON line with what it saw; the parent asserts on it.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const bridge = require('../index.js')
const { Tensor, fromDLPack, externalBuffersAllowed } = require(join(here, '..', '..', '..', 'dist', 'index.js'))

const py = bridge.loadInterpreter()
const helpers = py.importSync(join(here, 'bridge_helpers.py'))
const call = (fn, ...args) => py.callSync(helpers, fn, ...args)

const made = call('make', 'e', 'float32', [2, 3])
const base = call('refcount', 'e')
const token = call('to_node', 'e')
const exported = call('refcount', 'e')
const tensor = fromDLPack(bridge.fromPython(token))
const afterImport = call('refcount', 'e')
const sameAddress = tensor.dataPointer === BigInt(made.address)
const isCopy = tensor.isCopy
tensor.data[0] = 42 // the copy is writable, and numpy's array does not change
const numpyAfterWrite = call('info', 'e').hex
tensor.dispose()
const afterDispose = call('refcount', 'e')

const source = new Float32Array([1, 2, 3])
const ours = Tensor.from(source, [3])
const seen = call('claim', 'o', bridge.toPython(ours))
call('write_flat', 'o', 2, 30)

console.log(
  JSON.stringify({
    externalBuffersAllowed: externalBuffersAllowed(),
    isCopy,
    sameAddress,
    base,
    exported,
    afterImport,
    afterDispose,
    numpyUnchanged: numpyAfterWrite === made.hex,
    toNumpySameAddress: BigInt(seen.address) === ours.dataPointer,
    toNumpyWriteSeen: source[2] === 30,
    pending: bridge.pending(),
  }),
)
