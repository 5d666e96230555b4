/* Test support for the Wine tests (tests/windows.rs); never shipped.
 *
 * A Windows process to be seen by gputaskman.exe's process scan: it loads
 * every argument that ends in ".dll" (a runtime's DLL, to be classified
 * from the module list), prints "pid N" (its Windows PID, which the fake
 * NVML and PDH scenarios name), and lives until its stdin closes. Other
 * arguments (a secret for the redaction check) are only carried in its
 * command line.
 *
 * Build: x86_64-w64-mingw32-gcc -O2 -o holder.exe holder.c
 */
#include <windows.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n > 4 && _stricmp(argv[i] + n - 4, ".dll") == 0 && !LoadLibraryA(argv[i])) {
            printf("cannot load %s: error %lu\n", argv[i], GetLastError());
            return 1;
        }
    }
    printf("pid %lu\n", GetCurrentProcessId());
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof buf, stdin) > 0)
        ;
    return 0;
}
