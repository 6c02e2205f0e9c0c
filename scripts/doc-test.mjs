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
// A marker on the line before a block changes what is done with it:
//   <!-- doctest: typecheck-only (reason) -->   type-checked, not run (needs a GPU, a network...)
//   <!-- doctest: skip (reason) -->             neither (a fragment that cannot stand alone)
// A block asserts what the text around it claims (node:assert), so a false claim fails here.
// Prints one line per block and the counts; exits 1 if any block fails.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { basename, join, relative } from 'node:path'
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

  const failures = []
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
