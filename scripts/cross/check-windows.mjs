// Checks Windows prebuilds by reading the PE files themselves (no Windows or llvm tools):
//  - kind and CPU: a PE32+ (64-bit) DLL for x86-64 (machine 0x8664);
//  - imports: every DLL it imports (normal and delay-loaded) is on ALLOWED_IMPORTS, DLLs that
//    every Windows 10+ has. Node-API is looked up in the running node.exe at run time (napi-sys
//    `dyn-symbols`), so an import of node.exe or libnode would tie the file to one executable
//    name, and one of a MinGW runtime (libgcc_s, libwinpthread, libstdc++) or of the Visual C++
//    redistributable (vcruntime140, msvcp140) is a DLL the user's machine may not have;
//  - `napi_register_module_v1` in its export table.
// Usage: node scripts/cross/check-windows.mjs FILE.node ...  (*.win32-x64-msvc.node)
// Exit status 1 on any violation, with one line per file either way.
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'

const IMAGE_FILE_MACHINE = { x64: 0x8664, arm64: 0xaa64 }
const IMAGE_FILE_DLL = 0x2000
const PE32_PLUS = 0x20b
const EXPORT = 'napi_register_module_v1'

/**
 * The DLLs a prebuild may import, lower case: the kernel and the Universal C Runtime (UCRT, part
 * of Windows since 10, and what node.exe itself uses) through its api-ms-win-crt-* API sets, the
 * core API sets, and the system libraries Rust's standard library calls (bcryptprimitives for
 * random numbers, ws2_32 for sockets, advapi32/userenv for the environment). Anything else fails
 * the check until it is reviewed and added here.
 */
export const ALLOWED_IMPORTS = ['kernel32.dll', 'ntdll.dll', 'bcryptprimitives.dll', 'bcrypt.dll', 'advapi32.dll', 'ws2_32.dll', 'userenv.dll']
const ALLOWED_PREFIXES = ['api-ms-win-crt-', 'api-ms-win-core-']

export const importAllowed = (dll) => {
  const lower = dll.toLowerCase()
  return ALLOWED_IMPORTS.includes(lower) || ALLOWED_PREFIXES.some((prefix) => lower.startsWith(prefix))
}

/** Parses the headers, sections, imports and exports of a PE image. */
export function parsePe(data) {
  if (data.length < 0x40 || data.toString('latin1', 0, 2) !== 'MZ') throw new Error('not a PE file (no MZ header)')
  const pe = data.readUInt32LE(0x3c)
  if (pe + 24 > data.length || data.readUInt32BE(pe) !== 0x50450000) throw new Error('not a PE file (no PE signature)')
  const machine = data.readUInt16LE(pe + 4)
  const sectionCount = data.readUInt16LE(pe + 6)
  const optionalSize = data.readUInt16LE(pe + 20)
  const characteristics = data.readUInt16LE(pe + 22)
  const optional = pe + 24
  const magic = data.readUInt16LE(optional)
  // Data directories start at 112 in a PE32+ optional header (96 in PE32).
  const directories = optional + (magic === PE32_PLUS ? 112 : 96)
  const directoryCount = data.readUInt32LE(directories - 4)
  const directory = (index) => (index < directoryCount ? { rva: data.readUInt32LE(directories + index * 8), size: data.readUInt32LE(directories + index * 8 + 4) } : { rva: 0, size: 0 })
  const sections = []
  for (let i = 0; i < sectionCount; i++) {
    const at = optional + optionalSize + i * 40
    sections.push({
      name: data.toString('latin1', at, at + 8).replace(/\0+$/, ''),
      virtualSize: data.readUInt32LE(at + 8),
      rva: data.readUInt32LE(at + 12),
      rawSize: data.readUInt32LE(at + 16),
      rawOffset: data.readUInt32LE(at + 20),
    })
  }
  /** File offset of a relative virtual address. */
  const offsetOf = (rva) => {
    const section = sections.find((s) => rva >= s.rva && rva < s.rva + Math.max(s.virtualSize, s.rawSize))
    if (!section) throw new Error(`RVA 0x${rva.toString(16)} is in no section`)
    return section.rawOffset + (rva - section.rva)
  }
  const stringAt = (rva) => {
    const start = offsetOf(rva)
    const end = data.indexOf(0, start)
    return data.toString('latin1', start, end === -1 ? data.length : end)
  }
  const imports = []
  // Import directory (1): 20-byte descriptors, the DLL name RVA at +12, ended by a zero one.
  const importDir = directory(1)
  if (importDir.rva) {
    for (let at = offsetOf(importDir.rva); data.readUInt32LE(at + 12) !== 0; at += 20) imports.push(stringAt(data.readUInt32LE(at + 12)))
  }
  // Delay-load directory (13): 32-byte descriptors, the DLL name RVA at +4.
  const delayDir = directory(13)
  if (delayDir.rva) {
    for (let at = offsetOf(delayDir.rva); data.readUInt32LE(at + 4) !== 0; at += 32) imports.push(stringAt(data.readUInt32LE(at + 4)))
  }
  const exports = []
  // Export directory (0): NumberOfNames at +24, AddressOfNames (RVAs of the names) at +32.
  const exportDir = directory(0)
  if (exportDir.rva) {
    const at = offsetOf(exportDir.rva)
    const names = data.readUInt32LE(at + 24)
    const nameTable = offsetOf(data.readUInt32LE(at + 32))
    for (let i = 0; i < names; i++) exports.push(stringAt(data.readUInt32LE(nameTable + i * 4)))
  }
  return { machine, characteristics, magic, sections, imports, exports }
}

/** Checks one Windows prebuild for `arch` ('x64'); returns the problems found and a summary. */
export function checkPe(file, arch = 'x64') {
  let data
  try {
    data = readFileSync(file)
  } catch (error) {
    return { problems: [`cannot read it: ${error.code ?? error.message}`], summary: 'missing' }
  }
  let parsed
  try {
    parsed = parsePe(data)
  } catch (error) {
    return { problems: [error.message], summary: 'not PE' }
  }
  const problems = []
  if (parsed.magic !== PE32_PLUS) problems.push(`optional-header magic 0x${parsed.magic.toString(16)}, expected PE32+ (0x20b)`)
  if (parsed.machine !== IMAGE_FILE_MACHINE[arch]) problems.push(`machine 0x${parsed.machine.toString(16)}, expected 0x${IMAGE_FILE_MACHINE[arch].toString(16)} (${arch})`)
  if (!(parsed.characteristics & IMAGE_FILE_DLL)) problems.push('not a DLL (IMAGE_FILE_DLL unset)')
  const stray = parsed.imports.filter((dll) => !importAllowed(dll))
  if (stray.length) problems.push(`imports outside the allow-list (scripts/cross/check-windows.mjs): ${stray.join(', ')}`)
  if (!parsed.exports.includes(EXPORT)) problems.push(`does not export ${EXPORT}`)
  const machine = Object.entries(IMAGE_FILE_MACHINE).find(([, value]) => value === parsed.machine)?.[0] ?? `0x${parsed.machine.toString(16)}`
  return { problems, summary: `PE${parsed.magic === PE32_PLUS ? '32+' : '32'} ${machine} DLL, imports ${parsed.imports.join(' ')}` }
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  const files = process.argv.slice(2)
  if (!files.length) {
    console.error('usage: node scripts/cross/check-windows.mjs FILE.node ...  (all targets: node scripts/cross/check.mjs)')
    process.exit(2)
  }
  let failed = 0
  for (const file of files) {
    const arch = /\.win32-(x64|arm64)-msvc\.node$/.exec(basename(file))?.[1]
    if (!arch) throw new Error(`${file}: name does not say its target (want *.win32-x64-msvc.node)`)
    const { problems, summary } = checkPe(file, arch)
    console.log(`${problems.length ? 'FAIL' : 'ok  '} ${file}: ${summary}`)
    for (const problem of problems) console.log(`       ${problem}`)
    if (problems.length) failed += 1
  }
  process.exit(failed ? 1 : 0)
}
