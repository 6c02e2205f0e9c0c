// The doc test: every ```js, ```mjs and ```ts block of README.md and docs/*.md is a test.
//
//   node scripts/doc-test.mjs [FILE.md ...]      (default: README.md and docs/*.md; run by npm test)
//
// Each block is a standalone ES module importing from 'napi-dlpack', which resolves to this
// repository's built package (dist/, through its package.json `exports`) by a node_modules link
// in the work folder, __test__/.tmp/doc-test/. Other packages (onnxruntime-node, sharp, ...)
// resolve from the repository's node_modules (devDependencies). `ts` blocks are type-checked
// with `tsc --strict` (the repository's TypeScript, one run for all of them) and the JavaScript
// tsc emits is run; js/mjs blocks are run as they are. Every block runs in its own node process
// with the work folder as its working directory, where the fixtures blocks may read lie:
//   image.png   a 96x64 RGB image (mostly red, a blue square)
//   model.onnx  an image model: x float32 [1, 3, H, W] -> y float32 [1, 3], the softmax of the
//               channel means
//   dense.onnx  y = relu(x @ w): x [n, k], w [k, m] -> y [n, m]
// The addon guide's app code imports 'my-addon': the guide's Rust (docs/addons.md) is
// examples/consumer-addon/src/guide.rs verbatim (checked here), so 'my-addon' is that addon as
// built by __test__/native/consumer-addon/build.sh, with a loader like the one `napi build`
// generates and the example's index.d.ts.
// A marker on the line before a block changes what is done with it:
//   <!-- doctest: typecheck-only (reason) -->   type-checked, not run (needs a GPU, a network...)
//   <!-- doctest: skip (reason) -->             neither (a fragment that cannot stand alone)
// A block asserts what the text around it claims (node:assert), so a false claim fails here.
// Prints one line per block and the counts; exits 1 if any block fails.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const work = join(root, '__test__', '.tmp', 'doc-test')
const LANGS = new Set(['js', 'mjs', 'ts'])
const MARKER = /^<!--\s*doctest:\s*(typecheck-only|skip)\s*(\(.*\))?\s*-->\s*$/

/** The code blocks of one markdown file that the doc test handles. */
export function extractBlocks(file, text) {
  const lines = text.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)(.*)$/.exec(lines[i])
    if (!open) continue
    const [, indent, fence, lang] = open
    // Find the closing fence (same character, at least as long).
    let end = i + 1
    while (end < lines.length && !new RegExp(`^\\s*${fence[0]}{${fence.length},}\\s*$`).test(lines[end])) end++
    if (LANGS.has(lang)) {
      const previous = lines.slice(0, i).reverse().find((line) => line.trim() !== '') ?? ''
      const marker = MARKER.exec(previous.trim())
      const body = lines.slice(i + 1, end).map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      blocks.push({
        file,
        line: i + 1, // the fence's line; the block's first line is line + 1
        lang,
        mode: marker ? marker[1] : 'run',
        reason: marker?.[2]?.slice(1, -1) ?? '',
        code: `${body.join('\n')}\n`,
      })
    } else if (/^<!--\s*doctest/.test((lines[i - 1] ?? '').trim())) {
      throw new Error(`${file}:${i}: a doctest marker before a \`\`\`${lang} block, which is never run`)
    }
    i = end
  }
  // A marker that names nothing the doc test knows is a typo, not a silent no-op.
  lines.forEach((line, n) => {
    if (/<!--\s*doctest/.test(line) && !MARKER.test(line.trim())) throw new Error(`${file}:${n + 1}: unknown doctest marker: ${line.trim()}`)
  })
  return blocks
}

/** The markdown files checked by default: the README and docs/*.md. */
function defaultFiles() {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => join('docs', name))
  return ['README.md', ...docs]
}

/** The fixtures the blocks read, written once per run (sharp and the ONNX writer of the tests). */
export async function writeFixtures(dir) {
  const { default: sharp } = await import('sharp')
  const { onnxModel, denseReluModel } = await import(pathToFileURL(join(root, '__test__', 'harness', 'onnx-model.mjs')).href)
  const [width, height] = [96, 64]
  const pixels = new Uint8Array(width * height * 3)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const inSquare = x >= 60 && x < 84 && y >= 20 && y < 44
      pixels.set(inSquare ? [30, 40, 220] : [200 + ((x + y) % 40), 30, 20 + (x % 16)], (y * width + x) * 3)
    }
  }
  await sharp(pixels, { raw: { width, height, channels: 3 } }).png().toFile(join(dir, 'image.png'))
  const classifier = onnxModel(
    [
      { op: 'GlobalAveragePool', inputs: ['x'], outputs: ['pooled'] },
      { op: 'Flatten', inputs: ['pooled'], outputs: ['means'] },
      { op: 'Softmax', inputs: ['means'], outputs: ['y'] },
    ],
    [['x', [1, 3, 'height', 'width']]],
    [['y', [1, 3]]],
  )
  writeFileSync(join(dir, 'model.onnx'), classifier)
  writeFileSync(join(dir, 'dense.onnx'), denseReluModel())
}

/**
 * node_modules/my-addon: the example addon (which holds the addon guide's functions) as an
 * installed package: its index.d.ts, and an index.js that re-exports the binding's functions
 * one by one as napi-rs's generated loader does (so ES modules can import them by name).
 */
function linkGuideAddon() {
  const example = join(root, 'examples', 'consumer-addon')
  const binary = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
  const dir = join(work, 'node_modules', 'my-addon')
  // npm test builds it before this step; a doc test run on its own builds it here (the script
  // returns at once when the addon is newer than its sources).
  execFileSync('bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], { stdio: ['ignore', 'ignore', 'inherit'] })
  mkdirSync(dir, { recursive: true })
  const types = readFileSync(join(example, 'index.d.ts'), 'utf8')
  const names = [...types.matchAll(/^export declare function (\w+)/gm)].map(([, name]) => name)
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'my-addon', version: '0.0.0', main: 'index.js', types: 'index.d.ts' }, null, 2)}\n`)
  writeFileSync(join(dir, 'index.d.ts'), types)
  writeFileSync(
    join(dir, 'index.js'),
    `// Built by __test__/native/consumer-addon/build.sh (run by the doc test first).\n` +
      `const binding = require(${JSON.stringify(binary)})\n${names.map((name) => `module.exports.${name} = binding.${name}\n`).join('')}`,
  )
}

/** The guide's src/lib.rs block must be examples/consumer-addon/src/guide.rs below its header. */
function checkGuideSource() {
  const guide = readFileSync(join(root, 'docs', 'addons.md'), 'utf8')
  const at = guide.indexOf('**src/lib.rs**')
  const block = /```rust\n([\s\S]*?)```\n/.exec(guide.slice(at))?.[1]
  const source = readFileSync(join(root, 'examples', 'consumer-addon', 'src', 'guide.rs'), 'utf8').replace(/^(\/\/!.*\n)+\n/, '')
  if (at < 0 || block === undefined) return 'docs/addons.md: no src/lib.rs block after **src/lib.rs**'
  if (block !== source) return 'docs/addons.md: the src/lib.rs block differs from examples/consumer-addon/src/guide.rs (copy one onto the other)'
  return undefined
}

/** The text with the lines of fenced code blocks (and their fences) blanked, lines kept. */
/** The ```text blocks of a markdown file: the line of their first body line, and the body. */
function textDrawings(text) {
  const drawings = []
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```text') continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end].trim() !== '```') end++
    drawings.push({ line: start + 1, body: lines.slice(start, end).join('\n') })
    i = end
  }
  return drawings
}

function blankFences(text) {
  let fence
  return text
    .split('\n')
    .map((line) => {
      const open = /^\s*(`{3,}|~{3,})/.exec(line)
      if (fence) {
        if (open && open[1][0] === fence[0] && open[1].length >= fence.length && line.trim() === open[1]) fence = undefined
        return ''
      }
      if (open) {
        fence = open[1]
        return ''
      }
      return line
    })
    .join('\n')
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')

/**
 * What the docs point at must exist: every relative link (and its #anchor, in a markdown file)
 * and every repository path written in backticks (`__test__/...`, `scripts/...`), which moves
 * of files would otherwise leave behind. Returns the broken ones.
 */
export function checkReferences(files) {
  const anchors = new Map()
  const anchorsOf = (path) => {
    if (!anchors.has(path)) {
      const text = existsSync(path) ? blankFences(readFileSync(path, 'utf8')) : ''
      anchors.set(path, new Set([...text.matchAll(/^#{1,6}\s+(.*)$/gm)].map(([, heading]) => slug(heading))))
    }
    return anchors.get(path)
  }
  const broken = []
  for (const file of files) {
    const full = join(root, file)
    const text = readFileSync(full, 'utf8')
    const prose = blankFences(text)
    const lineOf = (index) => prose.slice(0, index).split('\n').length
    for (const match of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]
      if (/^[a-z]+:/.test(target)) continue
      const [path, anchor] = target.split('#')
      const resolved = path ? join(dirname(full), path) : full
      if (path && !existsSync(resolved)) broken.push(`${file}:${lineOf(match.index)}: link to a missing file: ${target}`)
      else if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
        broken.push(`${file}:${lineOf(match.index)}: link to a missing heading: ${target}`)
      }
    }
    // Repository paths in backticks, in the files written from the repository root; and the
    // paths of their ```text drawings (ARCHITECTURE.md's layers and tree), which name files
    // without backticks.
    if (dirname(file) === '.' || dirname(file) === 'docs') {
      for (const match of prose.matchAll(/`((?:__test__|src|lib|crates|scripts|examples|benches|include|docs|npm|\.ci|\.github)\/[\w./-]*)`/g)) {
        if (!existsSync(join(root, match[1]))) broken.push(`${file}:${lineOf(match.index)}: names a missing path: ${match[1]}`)
      }
      for (const { line, body } of textDrawings(text)) {
        for (const match of body.matchAll(/(?<![\w/.-])((?:__test__|src|lib|crates|scripts|examples|benches|include|docs|npm|\.ci|\.github)\/[\w./-]*[\w/])/g)) {
          const at = line + body.slice(0, match.index).split('\n').length - 1
          if (!existsSync(join(root, match[1]))) broken.push(`${file}:${at}: names a missing path (in a text drawing): ${match[1]}`)
        }
      }
    }
  }
  return broken
}

/** A file name for a block: where it comes from, readable in a stack trace. */
const blockName = (block) => `${block.file.replace(/[^\w]+/g, '_')}_L${block.line}`

async function main() {
  const args = process.argv.slice(2)
  const files = args.length ? args.map((file) => relative(root, join(process.cwd(), file))) : defaultFiles()
  const blocks = files.flatMap((file) => extractBlocks(file, readFileSync(join(root, file), 'utf8')))

  rmSync(work, { recursive: true, force: true })
  mkdirSync(join(work, 'node_modules'), { recursive: true })
  // 'napi-dlpack' is this repository, as an installed package: its exports map, dist/ and types.
  symlinkSync(root, join(work, 'node_modules', 'napi-dlpack'), 'dir')
  if (!existsSync(join(root, 'dist', 'index.mjs'))) throw new Error('dist/ is not built: run node scripts/ensure-built.mjs')
  await writeFixtures(work)
  linkGuideAddon()

  const failures = []
  // References: the checked files, plus the other docs a reader reaches from them.
  const referenceFiles = [...new Set([...files, 'CONTRIBUTING.md', 'ARCHITECTURE.md', 'CHANGELOG.md', 'examples/consumer-addon/README.md'])]
  for (const reference of checkReferences(referenceFiles.filter((file) => existsSync(join(root, file))))) {
    failures.push(reference)
    console.log(`FAIL ${reference}`)
  }
  const guideDrift = checkGuideSource()
  if (guideDrift) {
    failures.push('docs/addons.md')
    console.log(`FAIL ${guideDrift}`)
  }
  const tsBlocks = blocks.filter((block) => block.lang === 'ts' && block.mode !== 'skip')
  for (const block of blocks) {
    if (block.mode === 'skip') continue
    const extension = block.lang === 'ts' ? 'mts' : 'mjs'
    block.source = `${blockName(block)}.${extension}`
    // Emitted (or copied) next to the source, so `import.meta.url` and workers resolve alike.
    block.program = block.lang === 'ts' ? join('out', `${blockName(block)}.mjs`) : block.source
    writeFileSync(join(work, block.source), block.code)
  }

  // One tsc run type-checks every ts block (strict, as a user's project would) and emits the
  // JavaScript that is run.
  if (tsBlocks.length) {
    const tsconfig = {
      compilerOptions: {
        strict: true,
        target: 'es2022',
        lib: ['es2023'],
        module: 'nodenext',
        moduleResolution: 'nodenext',
        moduleDetection: 'force',
        types: ['node'],
        skipLibCheck: true,
        outDir: 'out',
        rootDir: '.',
        noEmitOnError: false,
      },
      files: tsBlocks.map((block) => block.source),
    }
    writeFileSync(join(work, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`)
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(work, 'tsconfig.json')], {
      cwd: work,
      encoding: 'utf8',
    })
    const output = `${tsc.stdout}${tsc.stderr}`
    // Map "<block>.mts(row,col): error TS..." back to the markdown line.
    const bySource = new Map(tsBlocks.map((block) => [block.source, block]))
    for (const line of output.split('\n')) {
      const match = /^(\S+\.mts)\((\d+),(\d+)\): (error .*)$/.exec(line.trim())
      if (!match) continue
      const block = bySource.get(match[1])
      if (!block) continue
      block.typeErrors ??= []
      block.typeErrors.push(`${block.file}:${block.line + Number(match[2])}:${match[3]} ${match[4]}`)
    }
    if (tsc.status !== 0 && !tsBlocks.some((block) => block.typeErrors)) {
      failures.push('tsc')
      console.log(`FAIL tsc exited ${tsc.status}:\n${output}`)
    }
  }

  let ran = 0
  let typeChecked = 0
  let skipped = 0
  for (const block of blocks) {
    const where = `${block.file}:${block.line + 1}`
    if (block.mode === 'skip') {
      skipped++
      console.log(`skip ${where} (${block.lang}): ${block.reason || 'no reason given'}`)
      continue
    }
    if (block.lang === 'ts') {
      typeChecked++
      if (block.typeErrors) {
        failures.push(where)
        console.log(`FAIL ${where} (ts): tsc --strict\n  ${block.typeErrors.join('\n  ')}`)
        continue
      }
    }
    if (block.mode === 'typecheck-only') {
      console.log(`ok   ${where} (ts, type-checked only: ${block.reason || 'no reason given'})`)
      continue
    }
    const started = Date.now()
    const run = spawnSync(process.execPath, ['--expose-gc', block.program], {
      cwd: work,
      encoding: 'utf8',
      timeout: 180_000,
      env: { ...process.env, NODE_NO_WARNINGS: '1' },
    })
    ran++
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    if (run.status === 0) {
      console.log(`ok   ${where} (${block.lang}${block.lang === 'ts' ? ', type-checked and run' : ', run'}, ${seconds} s)`)
    } else {
      failures.push(where)
      const why = run.error ? String(run.error) : `exit ${run.status ?? run.signal}`
      console.log(`FAIL ${where} (${block.lang}, ${why}, ${seconds} s)\n${`${run.stdout}${run.stderr}`.trim().replace(/^/gm, '  ')}`)
    }
  }

  console.log(
    `doc test: ${blocks.length} blocks in ${files.length} files: ${ran} run, ${typeChecked} type-checked (tsc --strict), ` +
      `${skipped} skipped; ${failures.length} failed`,
  )
  if (failures.length) process.exit(1)
}

if (process.argv[1] && basename(process.argv[1]) === basename(fileURLToPath(import.meta.url))) {
  await main()
}
