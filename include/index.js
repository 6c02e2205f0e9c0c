'use strict'
// For C and C++ addon authors: where napi_dlpack.h is, for the compiler's include path.
//   node-gyp:  "include_dirs": ["<!(node -p \"require('napi-dlpack/include').dir\")"]
//   cmake-js:  execute_process(COMMAND node -p "require('napi-dlpack/include').dir" ...)
// Plain `exports.name =` assignments, so Node's ESM import of this file sees the names too.
const { join } = require('node:path')

/** The absolute path of the directory holding napi_dlpack.h. */
exports.dir = __dirname
/** `dir`, double-quoted, as node-addon-api's `include` is. */
exports.include = JSON.stringify(__dirname)
/** The absolute path of napi_dlpack.h. */
exports.header = join(__dirname, 'napi_dlpack.h')
