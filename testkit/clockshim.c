/* clockshim: an LD_PRELOAD library that shifts what a process reads as
 * wall-clock time (CLOCK_REALTIME, gettimeofday, time) by a number of
 * seconds read from the file named in $CLOCKSHIM_FILE. Monotonic clocks are
 * untouched. The file is re-read at most every 10 ms of monotonic time.
 * (libfaketime hangs Debian's redis-server; this is all the tests need.)
 *
 * Build: cc -shared -fPIC -O2 -o clockshim.so clockshim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime(void) {
    static clock_gettime_fn fn;
    if (!fn) fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    return fn;
}

/* Offset in seconds, cached for 10 ms of monotonic time. */
static long long offset_seconds(void) {
    static long long cached;
    static long long checked_at_ns = -1;
    struct timespec mono;
    real_clock_gettime()(CLOCK_MONOTONIC, &mono);
    long long now_ns = mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (checked_at_ns < 0 || now_ns - checked_at_ns > 10000000LL) {
        checked_at_ns = now_ns;
        const char *path = getenv("CLOCKSHIM_FILE");
        FILE *f = path ? fopen(path, "r") : NULL;
        long long value = 0;
        if (f) {
            if (fscanf(f, "%lld", &value) == 1) cached = value;
            fclose(f);
        }
    }
    return cached;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real_clock_gettime()(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += offset_seconds();
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
