// Child process for __test__/threads/workers.spec.ts: the main thread makes a C tensor, transfers it
// (nobody claims the token), disposes its own tensor and ends naturally. Run with
// C_ADDON_REPORT_AT_EXIT=1: the C addon prints its deleter count from an atexit handler, after
// the main environment's cleanup hooks, which must have released the token. (process.exit() on
// the main thread runs no cleanup hooks in Node: nothing still alive is released then, tokens
// no more than imported tensors.)
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { fromDLPack, externalBuffersAllowed } = require('../../../dist/index.js')
const [addonPath] = process.argv.slice(2)
const c = require(addonPath)

// Device memory where host memory would be copied at import (Electron mode): it goes by token.
const device = externalBuffersAllowed() ? undefined : [10, 1]
const tensor = fromDLPack(c.makeTensor({ shape: [4], versioned: true, device }), device ? { device } : {})
const transfer = tensor.transfer()
tensor.dispose()
console.log(JSON.stringify({ kind: transfer.kind, deleterCallsBeforeExit: c.deleterCalls() }))
