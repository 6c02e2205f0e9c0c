// Copies the binding `napi build` generates into lib/binding/ (the loader index.js, its types
// index.d.ts, and a local build's .node) to dist/binding/, where the compiled TypeScript layer
// loads it (`require('./binding/index.js')` in dist/loader.js). tsc compiles only the .ts files
// of lib/; the generated loader is JavaScript and the addon a shared object, so they are copied.
// The .node only exists after a local build; the published package leaves it out ("files" in
// package.json), so an install loads the platform package's prebuild instead.
//
//   node scripts/copy-binding.mjs     (run by `npm run build` and scripts/ensure-built.mjs)
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
export const bindingSource = join(root, 'lib', 'binding')
export const bindingDist = join(root, 'dist', 'binding')

/** Mirrors lib/binding/ into dist/binding/ (files that changed only); returns the names copied. */
export function copyBinding() {
  mkdirSync(bindingDist, { recursive: true })
  const wanted = readdirSync(bindingSource).filter((name) => name === 'index.js' || name === 'index.d.ts' || name.endsWith('.node'))
  const copied = []
  for (const name of wanted) {
    const from = join(bindingSource, name)
    const to = join(bindingDist, name)
    const source = statSync(from)
    const same = existsSync(to) && statSync(to).size === source.size && statSync(to).mtimeMs >= source.mtimeMs
    if (same) continue
    // Removed first: a process may still have the old addon mapped; writing over it in place
    // would change the code under it.
    rmSync(to, { force: true })
    copyFileSync(from, to)
    copied.push(name)
  }
  // An addon built for a platform no longer in lib/binding/ (a cross build removed since).
  for (const name of readdirSync(bindingDist)) {
    if (!wanted.includes(name)) rmSync(join(bindingDist, name), { force: true })
  }
  return copied
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const copied = copyBinding()
  console.log(copied.length ? `# lib/binding -> dist/binding: ${copied.join(', ')}` : '# dist/binding is up to date')
}
