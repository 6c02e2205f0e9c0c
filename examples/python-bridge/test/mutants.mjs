// `node test/mutants.mjs` (after build.sh): mutation testing of the glue's safety logic. Each
// mutant removes ONE rule of bridge.c (the rename that hands a PyCapsule's tensor over, the
// "used_" check of our PyCapsule destructor, the removal of a claimed token, the major-version
// refusal, the exception kept across a destructor...); the script compiles it to a scratch file
// (never touching the working tree), runs test/bridge.test.mjs against it through
// NAPI_DLPACK_BRIDGE_NATIVE, and reports a mutant the suite does not fail as a survivor
// (exit 1). About 10 s a mutant. `node test/mutants.mjs WORD...` runs those whose id has a WORD.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const example = join(here, '..')
const root = join(example, '..', '..')
const source = readFileSync(join(example, 'bridge.c'), 'utf8')
const { pythonConfig, nodedir } = JSON.parse(readFileSync(join(example, 'build', 'config.json'), 'utf8'))

const mutants = [
  { id: 'put-skips-rename', find: 'if (PyCapsule_SetName(capsule, used_name) != 0) {', replace: 'if (used_name == NULL) {' },
  { id: 'put-renames-before-table', find: '  status = table_put(kind, tensor, &token);\n  if (status != TABLE_OK) {', replace: '  (void)PyCapsule_SetName(capsule, used_name);\n  status = table_put(kind, tensor, &token);\n  if (status != TABLE_OK) {' },
  { id: 'exhausted-table-reuses-tokens', find: 'if (g_next_token >= BRIDGE_MAX_TOKEN) {', replace: 'if (g_next_token >= BRIDGE_MAX_TOKEN + 2) {' },
  { id: 'legacy-wrapper-skips-inner-deleter', find: '  free(wrapper);\n  if (inner->deleter != NULL) inner->deleter(inner);', replace: '  free(wrapper);\n  (void)inner;' },
  { id: 'legacy-drops-read-only', find: '  if ((inner->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {', replace: '  if (0) {' },
  { id: 'legacy-keeps-versioned-owner', find: '  if (PyCapsule_SetName(capsule, kVersionedUsedName) != 0) {\n    free(wrapper);', replace: '  if (0) {\n    free(wrapper);' },
  { id: 'destructor-ignores-used-name', find: '  if (PyCapsule_IsValid(capsule, kVersionedUsedName) ||\n      PyCapsule_IsValid(capsule, kLegacyUsedName))\n    return;', replace: '' },
  { id: 'take-keeps-entry', find: '      *link = found->next;\n      g_pending--;', replace: '      g_pending--;' },
  { id: 'to-python-accepts-other-major', find: '  if (!major_understood(kind, tensor)) {\n    napi_dlpack_tensor_release(kind, tensor);\n    return js_throw_status(env, NAPI_DLPACK_ERR_VERSION,', replace: '  if (0) {\n    napi_dlpack_tensor_release(kind, tensor);\n    return js_throw_status(env, NAPI_DLPACK_ERR_VERSION,' },
  { id: 'from-python-leaks-on-failure', find: '    /* On failure ownership stayed with us (the header\'s contract). */\n    napi_dlpack_tensor_release(kind, tensor);', replace: '' , note: 'only reachable when napi_create_external fails: expected to survive' },
  { id: 'table-taken-reported-unknown', find: 'status = token != 0 && token < g_next_token ? TABLE_TAKEN : TABLE_UNKNOWN;', replace: 'status = TABLE_UNKNOWN;' },
  { id: 'js-token-upper-bound-dropped', find: '!(value >= 0 && value < 9007199254740992.0)', replace: '!(value >= 0 && value < 1e300)' },
  { id: 'py-float-token-refused', find: '  if (PyFloat_Check(arg)) {\n    double number', replace: '  if (0) {\n    double number' },
]

// `node test/mutants.mjs WORD...`: only the mutants whose id contains one of the words.
const words = process.argv.slice(2)
const chosen = words.length ? mutants.filter(({ id }) => words.some((word) => id.includes(word))) : mutants

const scratch = mkdtempSync(join(tmpdir(), 'bridge-mutants-'))
const flags = (what) => spawnSync(pythonConfig, what, { encoding: 'utf8' }).stdout.trim().split(/\s+/).filter(Boolean)
const survivors = []
try {
  for (const mutant of chosen) {
    if (source.split(mutant.find).length !== 2) throw new Error(`${mutant.id}: the snippet must occur exactly once in bridge.c`)
    const file = join(scratch, `${mutant.id}.c`)
    const out = join(scratch, `${mutant.id}.node`)
    writeFileSync(file, source.replace(mutant.find, mutant.replace))
    const cc = spawnSync(process.env.CC || 'cc', ['-O2', '-fPIC', '-shared', '-DNAPI_VERSION=8', ...flags(['--includes']), `-I${join(nodedir, 'include', 'node')}`, `-I${join(root, 'include')}`, '-o', out, file, ...flags(['--ldflags', '--embed']), '-pthread'], { encoding: 'utf8' })
    if (cc.status !== 0) throw new Error(`${mutant.id}: does not compile\n${cc.stderr}`)
    const run = spawnSync(process.execPath, ['--expose-gc', '--test', join(here, 'bridge.test.mjs')], {
      encoding: 'utf8',
      env: { ...process.env, NAPI_DLPACK_BRIDGE_NATIVE: out },
      timeout: 180_000,
    })
    const killed = run.status !== 0
    const failed = (run.stdout.match(/^not ok \d+ - (.*)$/gm) ?? []).slice(0, 2).join('; ')
    console.log(`${killed ? 'killed  ' : 'SURVIVED'} ${mutant.id}${killed ? `: ${failed || run.signal || `exit ${run.status}`}` : mutant.note ? ` (${mutant.note})` : ''}`)
    if (!killed && !mutant.note) survivors.push(mutant.id)
  }
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
console.log(survivors.length ? `${survivors.length} unexpected survivor(s): ${survivors.join(', ')}` : `every mutant without a note was killed (${chosen.length} mutants)`)
process.exitCode = survivors.length ? 1 : 0
