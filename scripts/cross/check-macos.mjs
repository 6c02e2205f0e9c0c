// Checks macOS prebuilds by reading the Mach-O files themselves (no Apple tools, no llvm):
//  - kind and CPU: a 64-bit Mach-O dylib or bundle for the target's CPU (x86_64 / arm64); a
//    universal (fat) file holds exactly one slice of each, and each slice is checked as its own;
//  - minimum macOS (LC_BUILD_VERSION's minos, or LC_VERSION_MIN_MACOSX): what the build was asked
//    for (11.0 arm64, 10.13 x64, MACOS_MIN in targets.mjs), so it loads on every macOS the
//    package claims and no older version silently refuses it;
//  - linked libraries: only /usr/lib/libSystem.B.dylib is loaded, and every undefined symbol
//    binds to it (its two-level-namespace library ordinal). Node-API itself is looked up at run
//    time (napi-sys `dyn-symbols`), so a bind to anything else would be a library the user's Mac
//    may not have;
//  - no builder path in the install name (LC_ID_DYLIB): an absolute path of the build machine
//    leaks it and means nothing elsewhere;
//  - `napi_register_module_v1` exported (the export trie dyld reads, else the symbol table);
//  - code signature: arm64 macOS refuses to map unsigned code, so the arm64 slice must carry a
//    signature (ad-hoc is what the linker writes); its CodeDirectory must cover the file up to
//    the signature, and every page hash must match the page (a later strip or edit of the file
//    invalidates them, and macOS then kills the process on load). An x86_64 slice needs none; if
//    it has one, its hashes are checked too.
// Usage: node scripts/cross/check-macos.mjs FILE.node ...   (the target is read from the name:
//   *.darwin-arm64.node, *.darwin-x64.node, *.darwin-universal.node)
// Exit status 1 on any violation, with one line per file either way.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'

import { MACOS_MIN } from './targets.mjs'

const MH_MAGIC_64 = 0xfeedfacf
const FAT_MAGIC = 0xcafebabe
const FAT_MAGIC_64 = 0xcafebabf
const CPU_TYPE = { x64: 0x01000007, arm64: 0x0100000c }
const CPU_NAME = { [CPU_TYPE.x64]: 'x64', [CPU_TYPE.arm64]: 'arm64' }
const MH_DYLIB = 6
const MH_BUNDLE = 8
const LC = {
  SYMTAB: 0x2,
  LOAD_DYLIB: 0xc,
  ID_DYLIB: 0xd,
  CODE_SIGNATURE: 0x1d,
  LOAD_WEAK_DYLIB: 0x80000018,
  REEXPORT_DYLIB: 0x8000001f,
  LAZY_LOAD_DYLIB: 0x20,
  LOAD_UPWARD_DYLIB: 0x80000023,
  VERSION_MIN_MACOSX: 0x24,
  BUILD_VERSION: 0x32,
  DYLD_INFO: 0x22,
  DYLD_INFO_ONLY: 0x80000022,
  DYLD_EXPORTS_TRIE: 0x80000033,
}
const DYLIB_LOADS = new Set([LC.LOAD_DYLIB, LC.LOAD_WEAK_DYLIB, LC.REEXPORT_DYLIB, LC.LAZY_LOAD_DYLIB, LC.LOAD_UPWARD_DYLIB])
const PLATFORM_MACOS = 1
const LIBSYSTEM = '/usr/lib/libSystem.B.dylib'
const EXPORT = '_napi_register_module_v1'
// Code-signing blobs (big-endian, unlike the rest of the file).
const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0
const CSMAGIC_CODEDIRECTORY = 0xfade0c02
const CSSLOT_CODEDIRECTORY = 0
const CS_ADHOC = 0x2
const CS_LINKER_SIGNED = 0x20000
const HASH = { 1: { name: 'sha1', size: 20 }, 2: { name: 'sha256', size: 32 } }

/** "11.0" / "10.13.4" from Mach-O's packed xxxx.yy.zz version. */
const unpackVersion = (v) => `${v >>> 16}.${(v >>> 8) & 0xff}${v & 0xff ? `.${v & 0xff}` : ''}`

/** A NUL-terminated string at `offset` of `buf`. */
function cString(buf, offset, end = buf.length) {
  const nul = buf.indexOf(0, offset)
  return buf.toString('utf8', offset, nul === -1 || nul > end ? end : nul)
}

/** Unsigned LEB128 at `state.pos` (advanced past it); numbers here stay far below 2^53. */
function uleb(buf, state) {
  let result = 0
  let scale = 1
  for (;;) {
    if (state.pos >= buf.length) throw new Error('truncated ULEB128 in the export trie')
    const byte = buf[state.pos++]
    result += (byte & 0x7f) * scale
    scale *= 128
    if (!(byte & 0x80)) return result
  }
}

/** Every name in a dyld export trie (the table dyld resolves a dlsym against). */
function exportTrieNames(trie) {
  const names = []
  const seen = new Set()
  const walk = (offset, prefix) => {
    // A trie whose edges loop would never end: each node is visited once.
    if (offset >= trie.length || seen.has(offset)) return
    seen.add(offset)
    const state = { pos: offset }
    const terminalSize = uleb(trie, state)
    if (terminalSize) names.push(prefix)
    state.pos += terminalSize
    const children = trie[state.pos++]
    for (let i = 0; i < children; i++) {
      const edge = cString(trie, state.pos)
      state.pos += Buffer.byteLength(edge) + 1
      walk(uleb(trie, state), prefix + edge)
    }
  }
  walk(0, '')
  return names
}

/** The parsed load commands of one thin 64-bit Mach-O image (`image` is that slice alone). */
function parseImage(image) {
  if (image.length < 32 || image.readUInt32LE(0) !== MH_MAGIC_64) throw new Error('not a 64-bit little-endian Mach-O image')
  const header = { cputype: image.readUInt32LE(4), filetype: image.readUInt32LE(12), ncmds: image.readUInt32LE(16) }
  const dylibs = []
  let idDylib
  let minos
  let symtab
  let exportTrie
  let signature
  let offset = 32
  for (let i = 0; i < header.ncmds; i++) {
    const cmd = image.readUInt32LE(offset)
    const size = image.readUInt32LE(offset + 4)
    if (size < 8 || offset + size > image.length) throw new Error(`load command ${i} runs past the file`)
    if (DYLIB_LOADS.has(cmd)) dylibs.push(cString(image, offset + image.readUInt32LE(offset + 8), offset + size))
    else if (cmd === LC.ID_DYLIB) idDylib = cString(image, offset + image.readUInt32LE(offset + 8), offset + size)
    else if (cmd === LC.BUILD_VERSION) {
      const platform = image.readUInt32LE(offset + 8)
      minos = { version: unpackVersion(image.readUInt32LE(offset + 12)), platform }
    } else if (cmd === LC.VERSION_MIN_MACOSX) minos = { version: unpackVersion(image.readUInt32LE(offset + 8)), platform: PLATFORM_MACOS }
    else if (cmd === LC.SYMTAB) {
      symtab = { symoff: image.readUInt32LE(offset + 8), nsyms: image.readUInt32LE(offset + 12), stroff: image.readUInt32LE(offset + 16), strsize: image.readUInt32LE(offset + 20) }
    } else if (cmd === LC.DYLD_INFO || cmd === LC.DYLD_INFO_ONLY) {
      const [off, size_] = [image.readUInt32LE(offset + 40), image.readUInt32LE(offset + 44)]
      if (size_) exportTrie = image.subarray(off, off + size_)
    } else if (cmd === LC.DYLD_EXPORTS_TRIE) {
      const [off, size_] = [image.readUInt32LE(offset + 8), image.readUInt32LE(offset + 12)]
      if (size_) exportTrie = image.subarray(off, off + size_)
    } else if (cmd === LC.CODE_SIGNATURE) signature = { dataoff: image.readUInt32LE(offset + 8), datasize: image.readUInt32LE(offset + 12) }
    offset += size
  }
  // nlist_64: n_strx u32, n_type u8, n_sect u8, n_desc u16, n_value u64.
  const symbols = []
  if (symtab) {
    for (let i = 0; i < symtab.nsyms; i++) {
      const at = symtab.symoff + i * 16
      const strx = image.readUInt32LE(at)
      symbols.push({ name: cString(image, symtab.stroff + strx, symtab.stroff + symtab.strsize), type: image[at + 4], desc: image.readUInt16LE(at + 6) })
    }
  }
  return { ...header, dylibs, idDylib, minos, symbols, exportTrie, signature }
}

/**
 * Verifies the embedded code signature of a slice: a SuperBlob whose CodeDirectory hashes every
 * page of the file before the signature. Returns a description, and the problems found.
 */
export function verifySignature(image, signature) {
  if (!signature) return { description: 'unsigned', problems: ['no code signature (LC_CODE_SIGNATURE)'] }
  const { dataoff, datasize } = signature
  if (dataoff + datasize > image.length) return { description: 'signature past the end', problems: ['LC_CODE_SIGNATURE runs past the file'] }
  const blob = image.subarray(dataoff, dataoff + datasize)
  if (blob.length < 12 || blob.readUInt32BE(0) !== CSMAGIC_EMBEDDED_SIGNATURE) return { description: 'bad signature', problems: ['the signature is not an embedded-signature SuperBlob'] }
  const count = blob.readUInt32BE(8)
  let directory
  for (let i = 0; i < count; i++) {
    const type = blob.readUInt32BE(12 + i * 8)
    const offset = blob.readUInt32BE(16 + i * 8)
    if (type === CSSLOT_CODEDIRECTORY) directory = blob.subarray(offset)
  }
  if (!directory || directory.readUInt32BE(0) !== CSMAGIC_CODEDIRECTORY) return { description: 'bad signature', problems: ['no CodeDirectory in the signature'] }
  const flags = directory.readUInt32BE(12)
  const hashOffset = directory.readUInt32BE(16)
  const nCodeSlots = directory.readUInt32BE(28)
  const codeLimit = directory.readUInt32BE(32)
  const hashSize = directory[36]
  const hashType = directory[37]
  const pageSize = 2 ** directory[39]
  const problems = []
  const hash = HASH[hashType]
  if (!hash || hash.size !== hashSize) return { description: `hash type ${hashType}`, problems: [`unknown code-directory hash type ${hashType} (size ${hashSize})`] }
  // The signature must cover everything before itself: bytes outside it could change unnoticed.
  if (codeLimit !== dataoff) problems.push(`the signature covers ${codeLimit} bytes, the code ends at ${dataoff}`)
  if (nCodeSlots !== Math.ceil(codeLimit / pageSize)) problems.push(`${nCodeSlots} page hashes for ${codeLimit} bytes of ${pageSize}-byte pages`)
  const bad = []
  for (let page = 0; page < nCodeSlots; page++) {
    const start = page * pageSize
    const expected = directory.subarray(hashOffset + page * hashSize, hashOffset + (page + 1) * hashSize)
    const actual = createHash(hash.name).update(image.subarray(start, Math.min(start + pageSize, codeLimit))).digest()
    if (!actual.equals(expected)) bad.push(page)
  }
  if (bad.length) problems.push(`${bad.length} of ${nCodeSlots} page hashes do not match (pages ${bad.slice(0, 8).join(', ')}${bad.length > 8 ? ', ...' : ''}): the file changed after it was signed`)
  const kinds = [flags & CS_ADHOC ? 'ad-hoc' : 'identity', ...(flags & CS_LINKER_SIGNED ? ['linker-signed'] : [])]
  return { description: `${kinds.join(' ')} ${hash.name}, ${nCodeSlots} pages${bad.length ? '' : ' verified'}`, problems }
}

/** Checks one thin slice for `arch`; returns its problems and a summary. */
export function checkSlice(image, arch) {
  const problems = []
  let parsed
  try {
    parsed = parseImage(image)
  } catch (error) {
    return { problems: [error.message], summary: 'unreadable' }
  }
  const cpu = CPU_NAME[parsed.cputype] ?? `cputype 0x${parsed.cputype.toString(16)}`
  if (parsed.cputype !== CPU_TYPE[arch]) problems.push(`CPU ${cpu}, expected ${arch}`)
  if (parsed.filetype !== MH_DYLIB && parsed.filetype !== MH_BUNDLE) problems.push(`Mach-O file type ${parsed.filetype}, expected a dylib (6) or bundle (8)`)
  const wantMin = MACOS_MIN[arch]
  if (!parsed.minos) problems.push('no minimum macOS version (LC_BUILD_VERSION / LC_VERSION_MIN_MACOSX)')
  else {
    if (parsed.minos.platform !== PLATFORM_MACOS) problems.push(`built for platform ${parsed.minos.platform}, not macOS (1)`)
    if (parsed.minos.version !== wantMin) problems.push(`minimum macOS ${parsed.minos.version}, expected ${wantMin}`)
  }
  const others = parsed.dylibs.filter((lib) => lib !== LIBSYSTEM)
  if (others.length) problems.push(`loads ${others.join(', ')} besides ${LIBSYSTEM}`)
  if (!parsed.dylibs.includes(LIBSYSTEM)) problems.push(`does not load ${LIBSYSTEM}`)
  if (parsed.idDylib?.startsWith('/')) problems.push(`install name is the builder's path ${parsed.idDylib}`)
  // Undefined external symbols (N_UNDF | N_EXT) and the library each binds to: the high byte of
  // n_desc is a 1-based index into the load-dylib list; 0xfe is a flat lookup at run time.
  const undefinedSymbols = parsed.symbols.filter((s) => (s.type & 0x0e) === 0 && s.type & 0x01 && !(s.type & 0xe0))
  const strayBinds = []
  for (const symbol of undefinedSymbols) {
    const ordinal = symbol.desc >> 8
    const lib = ordinal >= 1 && ordinal <= parsed.dylibs.length ? parsed.dylibs[ordinal - 1] : ordinal === 0xfe ? 'dynamic lookup' : `ordinal ${ordinal}`
    if (lib !== LIBSYSTEM) strayBinds.push(`${symbol.name} -> ${lib}`)
  }
  if (strayBinds.length) problems.push(`symbols not bound to libSystem: ${strayBinds.slice(0, 8).join(', ')}${strayBinds.length > 8 ? ', ...' : ''}`)
  const exported = parsed.exportTrie
    ? exportTrieNames(parsed.exportTrie).includes(EXPORT)
    : parsed.symbols.some((s) => s.name === EXPORT && (s.type & 0x0e) === 0x0e && s.type & 0x01)
  if (!exported) problems.push(`does not export ${EXPORT.slice(1)}`)
  let signed = 'unsigned'
  if (parsed.signature || arch === 'arm64') {
    const { description, problems: signatureProblems } = verifySignature(image, parsed.signature)
    signed = description
    problems.push(...signatureProblems)
  }
  const summary = `${cpu}, minos ${parsed.minos?.version ?? '?'}, ${parsed.dylibs.length} dylib(s), ${undefinedSymbols.length} imports, id ${parsed.idDylib ?? '(none)'}, ${signed}`
  return { problems, summary }
}

/**
 * Checks a macOS prebuild. `arch` is 'x64', 'arm64' or 'universal' (one slice of each, each
 * checked as a thin file).
 */
export function checkMacho(file, arch) {
  let data
  try {
    data = readFileSync(file)
  } catch (error) {
    return { problems: [`cannot read it: ${error.code ?? error.message}`], summary: 'missing' }
  }
  const magic = data.length >= 4 ? data.readUInt32BE(0) : 0
  if (magic === FAT_MAGIC || magic === FAT_MAGIC_64) {
    if (arch !== 'universal') return { problems: [`a universal (fat) file, expected a thin ${arch} Mach-O`], summary: 'universal' }
    const wide = magic === FAT_MAGIC_64
    const count = data.readUInt32BE(4)
    const problems = []
    const summaries = []
    const seen = []
    for (let i = 0; i < count; i++) {
      const at = 8 + i * (wide ? 32 : 20)
      const cputype = data.readUInt32BE(at)
      const offset = wide ? Number(data.readBigUInt64BE(at + 8)) : data.readUInt32BE(at + 8)
      const size = wide ? Number(data.readBigUInt64BE(at + 16)) : data.readUInt32BE(at + 12)
      const sliceArch = CPU_NAME[cputype]
      if (!sliceArch) {
        problems.push(`slice ${i}: unexpected cputype 0x${cputype.toString(16)}`)
        continue
      }
      seen.push(sliceArch)
      const slice = checkSlice(data.subarray(offset, offset + size), sliceArch)
      problems.push(...slice.problems.map((p) => `${sliceArch} slice: ${p}`))
      summaries.push(`[${slice.summary}]`)
    }
    for (const want of ['x64', 'arm64']) {
      if (seen.filter((a) => a === want).length !== 1) problems.push(`has ${seen.filter((a) => a === want).length} ${want} slices, expected one`)
    }
    return { problems, summary: `universal ${summaries.join(' ')}` }
  }
  if (arch === 'universal') {
    const thin = magic === 0xcffaedfe ? checkSlice(data, 'arm64').summary : 'not Mach-O'
    return { problems: ['a thin file, expected a universal (fat) Mach-O with x64 and arm64 slices'], summary: thin }
  }
  if (magic !== 0xcffaedfe) return { problems: ['not a 64-bit Mach-O file'], summary: `magic 0x${magic.toString(16)}` }
  return checkSlice(data, arch)
}

/** The arch a file's name says: napi-dlpack.darwin-arm64.node -> 'arm64'. */
export function archOfFile(file) {
  const match = /\.darwin-(x64|arm64|universal)\.node$/.exec(basename(file))
  if (!match) throw new Error(`${file}: name does not say its target (want *.darwin-<x64|arm64|universal>.node)`)
  return match[1]
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  const files = process.argv.slice(2)
  if (!files.length) {
    console.error('usage: node scripts/cross/check-macos.mjs FILE.node ...  (all targets: node scripts/cross/check.mjs)')
    process.exit(2)
  }
  let failed = 0
  for (const file of files) {
    const { problems, summary } = checkMacho(file, archOfFile(file))
    console.log(`${problems.length ? 'FAIL' : 'ok  '} ${file}: ${summary}`)
    for (const problem of problems) console.log(`       ${problem}`)
    if (problems.length) failed += 1
  }
  process.exit(failed ? 1 : 0)
}
