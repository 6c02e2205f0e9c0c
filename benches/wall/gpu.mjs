// `npm run bench:gpu`: host <-> GPU copies through the public API on cuda:0, and PyTorch's on
// the same machine in the same run when a python3 with a CUDA-enabled torch is found. Names the
// card (nvidia-smi, else the driver's device count). Without a usable CUDA driver it prints why
// and exits 77 (skipped), measuring nothing.
//
//   node --expose-gc benches/wall/gpu.mjs [--quick] [--max-mib N]    (default sizes: 1 KiB .. 1 GiB)
//
// Each figure is the median of ROUNDS runs of one operation, timed from the call to the end of
// a stream synchronisation (so an enqueued upload counts until it has landed). GB/s = bytes /
// seconds, 1 GB = 1e9 bytes.
//
//   H2D new          Tensor.from(bytes).to('cuda:0')            (a new device tensor each time)
//   H2D into         dst.copy_(host)                            (existing device tensor)
//   D2H new          d.to('cpu')                                (a new ArrayBuffer each time)
//   D2H into         d.to('cpu', { out })                       (existing, warm host tensor)
//   D2D              dst.copy_(d)
//   H2D permuted     the transposed view of a square uint8 matrix, .to('cuda:0')
//   H2D pinned       pinned.to('cuda:0')                        (a cuda_host tensor: DMA from it)
//   D2H pinned into  d.to('cuda_host', { out: pinned })         (existing cuda_host tensor)
// torch: x.cuda() (pageable), x.pin_memory().cuda() (pinned), d.cpu() (fresh), out.copy_(d)
// (existing pageable), pinned.copy_(d) (pinned).
//
// Copies between ordinary host memory and the device of at least the staging threshold (256 KiB)
// go through the pinned staging pipeline (docs/cuda.md): the "staged" column says whether that
// size did (the pipeline's own counter), and the goals of issue 27 are checked below the table.
import { execFileSync, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Tensor, cuda } = require('../../dist/index.js')
const { native } = require('../../dist/native.js')

if (!cuda.isAvailable()) {
  console.error(`bench:gpu: no usable CUDA device (${cuda.unavailableReason() ?? 'unknown reason'}): nothing measured`)
  process.exit(77)
}

const quick = process.argv.includes('--quick')
const maxArg = process.argv.indexOf('--max-mib')
const maxBytes = (maxArg > 0 ? Number(process.argv[maxArg + 1]) : 1024) * 2 ** 20
const ROUNDS = quick ? 3 : 7
const SIZES = [
  ['1 KiB', 2 ** 10],
  ['1 MiB', 2 ** 20],
  ['16 MiB', 2 ** 24],
  ['256 MiB', 2 ** 28],
  ['1 GiB', 2 ** 30],
].filter(([, bytes]) => bytes <= maxBytes)
const gc = globalThis.gc ?? (() => {})
const sync = () => native.cudaSynchronize(0)
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

function card() {
  try {
    return execFileSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader', '-i', '0'], {
      encoding: 'utf8',
    }).trim()
  } catch {
    return `cuda:0 of ${cuda.deviceCount()} (nvidia-smi not found)`
  }
}

/** Median seconds of `op` (which may return a tensor to dispose), each run synchronised. */
function seconds(op) {
  const samples = []
  for (let round = 0; round < ROUNDS; round++) {
    gc()
    sync()
    const start = process.hrtime.bigint()
    const result = op()
    sync()
    samples.push(Number(process.hrtime.bigint() - start) / 1e9)
    if (result && typeof result.dispose === 'function' && result.isCopy !== undefined && !op.keep) result.dispose()
  }
  return median(samples)
}

const ours = new Map()
for (const [label, bytes] of SIZES) {
  const host = Tensor.from(new Uint8Array(bytes).fill(7))
  const device = host.to('cuda:0')
  const deviceDst = Tensor.empty([bytes], 'uint8', { device: 'cuda:0' })
  const hostDst = Tensor.zeros([bytes], 'uint8')
  const side = Math.floor(Math.sqrt(bytes))
  const square = Tensor.from(new Uint8Array(side * side).fill(3), [side, side]).transpose(0, 1)
  // Pinned host tensors (cuda_host), allocated once: what torch's pin_memory() figures compare with.
  const pinned = host.pin()
  const pinnedDst = Tensor.empty([bytes], 'uint8', { device: 'cuda_host' })
  const intoPinned = () => device.to('cuda_host', { out: pinnedDst })
  intoPinned.keep = true
  const intoDevice = () => deviceDst.copy_(host)
  intoDevice.keep = true
  const intoHost = () => device.to('cpu', { out: hostDst })
  intoHost.keep = true
  const d2d = () => deviceDst.copy_(device)
  d2d.keep = true
  const stagedBefore = native.cudaStagingStats().staged
  const row = {
    'H2D new': bytes / seconds(() => Tensor.from(new Uint8Array(bytes)).to('cuda:0')),
    'H2D into': bytes / seconds(intoDevice),
    'D2H new': bytes / seconds(() => device.to('cpu')),
    'D2H into': bytes / seconds(intoHost),
    D2D: bytes / seconds(d2d),
    'H2D permuted': (side * side) / seconds(() => square.to('cuda:0')),
    'H2D pinned': bytes / seconds(() => pinned.to('cuda:0')),
    'D2H pinned into': bytes / seconds(intoPinned),
  }
  row.staged = native.cudaStagingStats().staged > stagedBefore ? 'yes' : 'no'
  ours.set(label, row)
  for (const tensor of [host, device, deviceDst, hostDst, square, pinned, pinnedDst]) tensor.dispose()
}

const TORCH = String.raw`
import json, statistics, sys, time
import torch
if not torch.cuda.is_available():
    print(json.dumps(None)); sys.exit(0)
rounds, sizes = int(sys.argv[1]), json.loads(sys.argv[2])
def timed(op):
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize(); start = time.perf_counter(); r = op(); torch.cuda.synchronize()
        samples.append(time.perf_counter() - start); del r
    return statistics.median(samples)
out = {'version': torch.__version__}
for label, n in sizes:
    x = torch.full((n,), 7, dtype=torch.uint8); p = x.pin_memory(); d = x.cuda()
    e = torch.empty_like(x); pe = torch.empty_like(p).pin_memory()
    out[label] = {
        'H2D pageable': n / timed(lambda: x.cuda()),
        'H2D pinned': n / timed(lambda: p.cuda(non_blocking=True)),
        'D2H new': n / timed(lambda: d.cpu()),
        'D2H into pageable': n / timed(lambda: e.copy_(d)),
        'D2H into pinned': n / timed(lambda: pe.copy_(d, non_blocking=True)),
    }
    del x, p, d, e, pe
print(json.dumps(out))
`
let torch = null
const python = spawnSync('python3', ['-c', TORCH, String(ROUNDS), JSON.stringify(SIZES)], { encoding: 'utf8' })
if (python.status === 0) torch = JSON.parse(python.stdout.trim().split('\n').pop() ?? 'null')

const gbps = (value) => (value === undefined ? '–' : (value / 1e9).toFixed(2))
console.log(`\n### host <-> GPU copies on ${card()} (Node ${process.versions.node}; median of ${ROUNDS}; GB/s)\n`)
const oursCols = ['H2D new', 'H2D into', 'D2H new', 'D2H into', 'D2D', 'H2D permuted', 'H2D pinned', 'D2H pinned into']
const torchCols = torch ? ['H2D pageable', 'H2D pinned', 'D2H new', 'D2H into pageable', 'D2H into pinned'] : []
console.log(`| size | staged | ${oursCols.map((c) => `ours ${c}`).join(' | ')}${torchCols.map((c) => ` | torch ${c}`).join('')} |`)
console.log(`|---|:-:|${[...oursCols, ...torchCols].map(() => '---:').join('|')}|`)
for (const [label] of SIZES) {
  const row = ours.get(label)
  const theirs = torch?.[label] ?? {}
  console.log(`| ${label} | ${row.staged} | ${oursCols.map((c) => gbps(row[c])).join(' | ')}${torchCols.map((c) => ` | ${gbps(theirs[c])}`).join('')} |`)
}
const staging = native.cudaStagingStats()
console.log(`
(staging pipeline: ${staging.chunkBytes / 2 ** 20} MiB chunks, from ${staging.minBytes / 2 ** 10} KiB; ${staging.fallbacks} large copies took the direct path)`)
// The goals of issue 27 at the largest size measured, where torch was measured beside.
const [largest] = SIZES.at(-1) ?? []
const mine = ours.get(largest)
const theirs = torch?.[largest]
if (mine && theirs) {
  const goal = (name, value, target) => console.log(`- ${name}: ${gbps(value)} vs ${gbps(target)} GB/s: ${value >= target ? 'met' : 'NOT met'}`)
  console.log(`
goals at ${largest}:`)
  goal('H2D new >= 2x torch pageable .cuda()', mine['H2D new'], 2 * theirs['H2D pageable'])
  goal("D2H new >= torch's pageable copy into existing memory", mine['D2H new'], theirs['D2H into pageable'])
  goal('H2D permuted within 2x of H2D new', mine['H2D permuted'], mine['H2D new'] / 2)
}
if (torch) console.log(`\n(torch ${torch.version})`)
else console.log(`\n(no python3 with CUDA-enabled torch: ${python.error?.message ?? python.stderr?.trim().split('\n').pop() ?? 'torch.cuda unavailable'})`)
