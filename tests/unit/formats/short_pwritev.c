/*
 * An LD_PRELOAD interposer for tests/unit/formats/test_short_pwritev.py: pwritev (and pwritev64,
 * the name formats/_write_thread.c imports on glibc) passes at most SHORT_PWRITEV_MAX bytes to
 * the real call, so every write is short, as a regular file's never is. Each call appends one
 * byte to the file named by SHORT_PWRITEV_MARK, if set, so the test can count the calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_IOV 1024

typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);

static void
mark(void)
{
    const char *path = getenv("SHORT_PWRITEV_MARK");
    if (path == NULL) {
        return;
    }
    int saved = errno;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        (void)write(fd, "x", 1);
        close(fd);
    }
    errno = saved;
}

static ssize_t
short_call(const char *name, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    pwritev_fn real = (pwritev_fn)dlsym(RTLD_NEXT, name);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    mark();
    const char *max_env = getenv("SHORT_PWRITEV_MAX");
    long max = max_env != NULL ? atol(max_env) : 0;
    if (max <= 0 || iovcnt <= 0 || iovcnt > MAX_IOV) {
        return real(fd, iov, iovcnt, offset);
    }
    struct iovec cut[MAX_IOV]; /* the first `max` bytes of iov */
    int n = 0;
    size_t left = (size_t)max;
    for (int i = 0; i < iovcnt && left > 0; i++) {
        cut[n] = iov[i];
        if (cut[n].iov_len > left) {
            cut[n].iov_len = left;
        }
        left -= cut[n].iov_len;
        n++;
    }
    return real(fd, cut, n, offset);
}

ssize_t
pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    return short_call("pwritev", fd, iov, iovcnt, offset);
}

ssize_t
pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t offset)
{
    return short_call("pwritev64", fd, iov, iovcnt, (off_t)offset);
}
