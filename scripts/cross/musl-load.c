/* Loads Node-API addons with the C library's own dynamic loader, outside any JS runtime:
 * scripts/cross/test.mjs builds this for x86_64-linux-musl (zig cc) and runs it through
 * Debian's musl loader on the linux-x64-musl prebuild, which has no musl Node to run in here.
 * dlopen(RTLD_NOW) resolves every symbol the addon imports against musl (a glibc-only import
 * fails here) and runs its initialisers; the addon must then export napi_register_module_v1,
 * the entry point Node calls. Exit status 0 when every file given loads. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    void *addon = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (addon == NULL) {
      fprintf(stderr, "FAIL %s: dlopen: %s\n", argv[i], dlerror());
      failed = 1;
      continue;
    }
    if (dlsym(addon, "napi_register_module_v1") == NULL) {
      fprintf(stderr, "FAIL %s: no napi_register_module_v1: %s\n", argv[i], dlerror());
      failed = 1;
      continue;
    }
    printf("ok   %s: loaded by the musl loader, napi_register_module_v1 found\n", argv[i]);
  }
  return argc < 2 ? 2 : failed;
}
