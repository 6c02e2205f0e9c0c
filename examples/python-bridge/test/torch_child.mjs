// Run by bridge.test.mjs in a child process: torch 1.13 (Debian's python3-torch, which speaks only
// the legacy DLPack struct) against the bridge, both ways. Its Python path is this folder only,
// so torch gets the Debian numpy it was built with, not .python-packages' numpy 2. Prints one
// JSON line with what it saw; the parent asserts on it.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const bridge = require('../index.js')
const { Tensor, fromDLPack } = require(join(root, 'dist', 'index.js'))
const c = require(join(root, 'target', 'c-addon', 'c_addon.node'))

const py = bridge.loadInterpreter({ path: [join(here, '..')] })
const helpers = py.importSync(join(here, 'torch_helpers.py'))
const call = (fn, ...args) => py.callSync(helpers, fn, ...args)
const seen = { torch: call('version') }

// torch -> Node: torch's legacy "dltensor" capsule (its __dlpack__ refuses max_version)
const torchAddress = call('make', 't')
const tensor = fromDLPack(bridge.fromPython(call('to_node', 't')))
seen.toNodeSameAddress = tensor.dataPointer === BigInt(torchAddress)
seen.toNodeValues = Array.from(tensor.data)
tensor.data[0] = 100
seen.torchSawWrite = call('values', 't')[0] === 100
call('write', 't', 5, -5)
seen.nodeSawWrite = tensor.data[5] === -5
tensor.dispose()
call('drop', 't')

// Node -> torch: torch.from_dlpack asks for the legacy struct; the glue wraps our versioned one
const source = new Float32Array([1, 2, 3, 4])
const ours = Tensor.from(source, [2, 2])
const claimed = call('claim', 'n', bridge.toPython(ours))
seen.toTorchSameAddress = BigInt(claimed.address) === ours.dataPointer
seen.toTorchShape = claimed.shape
call('write', 'n', 3, 40)
seen.nodeSawTorchWrite = source[3] === 40
call('drop', 'n')

c.resetDeleterCalls()
call('claim', 'cn', bridge.toPython(c.makeTensor({ shape: [3], versioned: true })))
seen.deleterWhileHeld = c.deleterCalls()
call('drop', 'cn')
seen.deleterAfterDrop = c.deleterCalls()

// a read-only tensor is refused to torch (it could not be told), and stays releasable
c.resetDeleterCalls()
try {
  call('claim', 'ro', bridge.toPython(c.makeTensor({ shape: [3], versioned: true, readonly: true })))
  seen.readOnlyError = 'none'
} catch (error) {
  seen.readOnlyError = /ERR_DLPACK_READ_ONLY/.test(error.message) ? 'ERR_DLPACK_READ_ONLY' : error.message
}
call('collect') // the refused holder dies with the exception's traceback
seen.readOnlyDeleterCalls = c.deleterCalls()
seen.pending = bridge.pending()
console.log(JSON.stringify(seen))
