/* slowlookup: an LD_PRELOAD library that makes every getaddrinfo(3) take
 * $SLOWLOOKUP_MS milliseconds longer (a slow resolver), so that a test can
 * reach a process while it is still resolving its servers' names. With
 * $SLOWLOOKUP_MARK set, the first lookup creates that file as it begins:
 * the process is then past its start-up, in its own code.
 *
 * Build: cc -shared -fPIC -O2 -o slowlookup.so slowlookup.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <netdb.h>
#include <stdlib.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    static getaddrinfo_fn real;
    if (!real) real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char *mark = getenv("SLOWLOOKUP_MARK");
    if (mark) {
        int fd = open(mark, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) close(fd);
    }
    const char *ms = getenv("SLOWLOOKUP_MS");
    long delay = ms ? atol(ms) : 0;
    if (delay > 0) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return real(node, service, hints, res);
}
