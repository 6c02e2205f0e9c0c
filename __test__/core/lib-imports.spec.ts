// The modules of lib/ import one another in one direction (ARCHITECTURE.md, "The layers"): no
// module reaches itself again through its imports. Type-only imports count too: a cycle of types
// is still two concepts that cannot be read apart. The generated binding (lib/binding/) is
// JavaScript and imports nothing of lib/.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'
import ts from 'typescript'

const lib = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'lib')

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === 'binding' ? [] : sources(path)
    return /\.m?ts$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : []
  })
}

/** The lib/ file a relative specifier names (`./x.js` is `./x.ts`), or null for a package or the binding. */
function resolveSpecifier(from: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null
  const base = resolve(dirname(from), specifier.replace(/\.m?js$/, ''))
  return [`${base}.ts`, `${base}.mts`, join(base, 'index.ts')].find((candidate) => existsSync(candidate)) ?? null
}

/** Every lib/ module a file imports: imports, re-exports and `import('...')` types. */
function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true)
  const found = new Set<string>()
  const add = (specifier: string) => {
    const target = resolveSpecifier(file, specifier)
    if (target) found.add(target)
  }
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text)
    }
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return [...found]
}

/** The import cycles of `graph`, each as the path of files that closes it. */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = []
  const state = new Map<string, 'open' | 'done'>()
  const stack: string[] = []
  const walk = (file: string): void => {
    state.set(file, 'open')
    stack.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next])
      else if (!state.has(next)) walk(next)
    }
    stack.pop()
    state.set(file, 'done')
  }
  for (const file of graph.keys()) if (!state.has(file)) walk(file)
  return cycles
}

test('the cycle finder finds a cycle, and a chain is none', (t) => {
  t.deepEqual(cyclesOf(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']]])), [['a', 'b', 'c', 'a']])
  t.deepEqual(cyclesOf(new Map([['a', ['b', 'c']], ['b', ['c']], ['c', []]])), [])
})

test('the modules of lib/ import one another without cycles, type imports included', (t) => {
  const files = sources(lib)
  const graph = new Map(files.map((file) => [file, importsOf(file)]))
  // The walk reads the imports the class module has: an empty graph would pass vacuously.
  t.true((graph.get(join(lib, 'tensor.ts')) ?? []).includes(join(lib, 'checks.ts')))
  const cycles = cyclesOf(graph).map((cycle) => cycle.map((file) => relative(lib, file)).join(' -> '))
  t.deepEqual(cycles, [])
})
