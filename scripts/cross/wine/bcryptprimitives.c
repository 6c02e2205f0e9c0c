/*
 * TEST-ONLY stand-in for Windows' bcryptprimitives.dll, for running the Windows prebuild under
 * Wine (scripts/cross/test.mjs). Never shipped: real Windows 10 and later has this DLL.
 *
 * Rust's standard library (1.78 and later) imports ProcessPrng from bcryptprimitives.dll for
 * random numbers (HashMap seeds). Debian 12's Wine 8 has no such DLL, so loading the addon fails
 * with "module not found" before any of its code runs. This file provides that one function on
 * top of BCryptGenRandom, which Wine does implement, with the documented contract: fill the
 * buffer with random bytes, always return TRUE.
 *
 * Built by scripts/cross/tools.mjs: zig cc -target x86_64-windows-gnu -shared -O2 ... -lbcrypt
 */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
  /* BCryptGenRandom takes a ULONG length: fill larger buffers in pieces. */
  while (size > 0) {
    ULONG chunk = size > 0x40000000 ? 0x40000000 : (ULONG)size;
    if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) {
      /* The real function cannot fail; a shim that could would hand out unrandom bytes. */
      ExitProcess(70);
    }
    data += chunk;
    size -= chunk;
  }
  return TRUE;
}
