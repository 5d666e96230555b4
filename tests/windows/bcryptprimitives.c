/* Test support for running gputaskman.exe under Wine only; never shipped.
 *
 * Rust's standard library (1.78+) draws its random bytes from ProcessPrng
 * in bcryptprimitives.dll, which Windows 10 and later have and Wine 8.0
 * lacks: without this stub the loader stops the .exe before main. Placed
 * beside the .exe, it forwards to advapi32's RtlGenRandom
 * (SystemFunction036), which Wine has.
 *
 * Build: x86_64-w64-mingw32-gcc -shared -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a ULONG: longer requests go in pieces. */
    while (length > 0) {
        ULONG piece = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, piece))
            return FALSE;
        data += piece;
        length -= piece;
    }
    return TRUE;
}
