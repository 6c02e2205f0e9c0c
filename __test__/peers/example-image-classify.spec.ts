// Runs examples/image-classify (sharp -> Tensor -> permute + astype -> ONNX Runtime -> sharp)
// in a child process of this runtime and checks what it prints and writes: the class, the
// zero-copy hand-overs, the copies it counts, and the grey map it wrote against the same
// pipeline computed in JS from the decoded input image.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'
import sharp from 'sharp'

import { runtime } from '../harness/helpers.js'

const example = fileURLToPath(new URL('../../examples/image-classify/index.mjs', import.meta.url))

test('examples/image-classify: sharp -> Tensor -> native preprocessing -> ONNX Runtime -> sharp', async (t) => {
  const outDir = mkdtempSync(join(tmpdir(), 'image-classify-test-'))
  t.teardown(() => rmSync(outDir, { recursive: true, force: true }))
  const args = runtime === 'deno' ? ['run', '-A', example, '--out', outDir] : [example, '--out', outDir]
  const output = execFileSync(process.execPath, args, { encoding: 'utf8', env: process.env })
  t.log(output)

  t.regex(output, /zero-copy {2}sharp's decoded Buffer -> Tensor\.from/)
  t.regex(output, /zero-copy {2}input tensor -> ort\.Tensor/)
  t.regex(output, /^class: red$/m)
  t.regex(output, /^ORT wrote its outputs into our tensors: true$/m)
  // The only copies are onnxruntime-node's own copies of the outputs it returns (1.30 copies
  // them after writing into ours); none is made on the napi-dlpack side.
  const copies = /^copies: (\d+)(.*)$/m.exec(output)
  t.truthy(copies)
  const listed = copies?.[2] ?? ''
  t.is(Number(copies?.[1]), (listed.match(/ORT's returned/g) ?? []).length, listed)
  const probabilities = [...output.matchAll(/^ {2}(red|green|blue|grey) +([0-9.]+)$/gm)].map((m) => Number(m[2]))
  t.is(probabilities.length, 4)
  t.true(Math.abs(probabilities.reduce((a, b) => a + b, 0) - 1) < 1e-3)

  // The grey map: mean over channels of the normalised input, back to 0..255.
  const input = await sharp(join(outDir, 'input.png')).removeAlpha().raw().toBuffer({ resolveWithObject: true })
  const grey = await sharp(join(outDir, 'grey.png')).extractChannel(0).raw().toBuffer({ resolveWithObject: true })
  t.is(grey.info.channels, 1)
  t.deepEqual([grey.info.width, grey.info.height], [input.info.width, input.info.height])
  const mean = [0.485, 0.456, 0.406]
  const std = [0.229, 0.224, 0.225]
  let worst = 0
  for (let i = 0; i < grey.data.length; i++) {
    let sum = 0
    for (let c = 0; c < 3; c++) sum += Math.fround((input.data[i * 3 + c] * (1 / 255) - mean[c]) / std[c]) / 3
    const want = Math.min(255, Math.max(0, Math.round(sum * 0.226 * 255 + 0.449 * 255)))
    worst = Math.max(worst, Math.abs(grey.data[i] - want))
  }
  t.true(worst <= 1, `largest difference ${worst} (float32 rounding in the Conv may move a value by one)`)
})
