// Copies LICENSE into every npm/<platform> directory before `napi prepublish` publishes them
// (npm packs a package's own LICENSE file, and does not follow a symlink to the root's).
// Part of `npm run prepublishOnly`; the copies are build output (.gitignore).
import { copyFileSync, existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
for (const dir of readdirSync(join(root, 'npm'))) {
  if (existsSync(join(root, 'npm', dir, 'package.json'))) copyFileSync(join(root, 'LICENSE'), join(root, 'npm', dir, 'LICENSE'))
}
