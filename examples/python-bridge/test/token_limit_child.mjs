// Run by bridge.test.mjs with NAPI_DLPACK_BRIDGE_FIRST_TOKEN=2^53-2: the last two tokens a
// process can issue, then the refusals once they are spent (both directions). Prints one JSON
// line with what it saw; the parent asserts on it.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const bridge = require('../index.js')
const { fromDLPack } = require(join(root, 'dist', 'index.js'))
const c = require(join(root, 'target', 'c-addon', 'c_addon.node'))

const py = bridge.loadInterpreter()
const helpers = py.importSync(join(here, 'bridge_helpers.py'))
const call = (fn, ...args) => py.callSync(helpers, fn, ...args)

call('make', 'z', 'float32', [2])
const base = call('refcount', 'z')
const first = call('to_node', 'z') // 2^53 - 2, from Python
const second = bridge.toPython(c.makeTensor({ shape: [2], versioned: true })) // 2^53 - 1, from JS
const tensor = fromDLPack(bridge.fromPython(first))
const claimed = call('claim', 'zc', second)
const claimedBoth = tensor.numel === 2 && claimed.shape[0] === 2
tensor.dispose()
call('drop', 'zc')

c.resetDeleterCalls()
let jsError = ''
try {
  bridge.toPython(c.makeTensor({ shape: [2], versioned: true }))
} catch (error) {
  jsError = `${error.code}: ${error.message}`
}
const cDeleterCalls = c.deleterCalls()

let pythonError = ''
try {
  call('to_node', 'z')
} catch (error) {
  pythonError = error.message
}
call('collect')
const refcountAfterRefusal = call('refcount', 'z')

console.log(JSON.stringify({ tokens: [first, second], claimedBoth, jsError, cDeleterCalls, pythonError, refcountAfterRefusal, base, pending: bridge.pending() }))
