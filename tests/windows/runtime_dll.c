/* Test support for the Wine tests (tests/windows.rs); never shipped.
 *
 * A DLL with nothing in it, built under a runtime's file name
 * (ggml-cuda.dll): holder.exe loads it, and the process scan must name the
 * runtime from the module list.
 *
 * Build: x86_64-w64-mingw32-gcc -shared -o ggml-cuda.dll runtime_dll.c
 */
#include <windows.h>

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance;
    (void)reason;
    (void)reserved;
    return TRUE;
}
