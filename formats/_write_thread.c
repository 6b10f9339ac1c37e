/*
 * formats._write_thread: staging-file writes done on a thread that never takes the GIL.
 *
 * The sink's consuming thread is its critical path: everything it does adds to the time a batch
 * takes. A staging file's writev (a copy into the page cache) and the write-out hint
 * (sync_file_range, which queues the kernel's writes) need no Python, so they are queued here and
 * done by one POSIX thread, in the order they were queued. A Python thread doing them instead
 * (tried, 2026-11-28) gained nothing: each write took the GIL twice, and on two busy cores
 * handing the GIL to a thread not yet scheduled stalls the consuming thread as long as the
 * write saved it.
 *
 * write(tracker, fd, pieces, offset, total): pwritev of the pieces (bytes-like objects, held
 *   until done) at offset. hint(tracker, fd): sync_file_range(SYNC_FILE_RANGE_WRITE) after the
 *   writes queued so far. settle(tracker, raise_error): wait (without the GIL) for every job of
 *   the tracker; raise the first failed job's OSError if raise_error. A Tracker is one file's
 *   count of jobs and its first error; after an error its later jobs are skipped.
 * A writer more than `limit` bytes ahead waits. Finished jobs' objects are released by the next
 * call from Python (the worker never touches a Python object). A forked child starts its own
 * thread at its first job; jobs queued in the parent are not the child's.
 *
 * Queueing a job costs the consuming thread no hand-over (issue 24, 2026-12-07; per 300,000
 * Avro records the queue calls went from 11-27 ms of waiting to ~1 ms, timed inside them):
 * - The GIL is kept while the module lock is taken: the worker never takes the GIL and holds
 *   the lock only to pop or count a job, so this cannot deadlock. Dropping the GIL for it let a
 *   commit thread take it, and the consuming thread then waited for it to come back.
 * - The worker runs as SCHED_BATCH (Linux): waking it does not preempt the thread that woke it.
 *   As an ordinary thread, each wake-up could push the consuming thread off its core until
 *   the copy was done, on a machine whose other core parses the next fetch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

typedef struct {
    PyObject_HEAD
    long long queued; /* jobs queued for this file (under the module lock) */
    long long done;   /* jobs finished (under the module lock) */
    int error;        /* errno of the first failed job, 0 if none */
} Tracker;

typedef struct Job {
    struct Job *next;
    Tracker *tracker; /* a reference, released with the job */
    int fd;
    int hint;
    off_t offset;
    Py_ssize_t total;
    Py_ssize_t count;
    Py_buffer *views; /* count views, released with the job */
} Job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;     /* a job was queued */
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER; /* a job finished */
static Job *head = NULL, *tail = NULL;                     /* queued, oldest first */
static Job *reaped = NULL;                                 /* finished, to release */
static long long pending = 0;                              /* bytes queued, not yet written */
static long long limit = 16 << 20;
static pid_t owner = 0; /* the process whose thread runs */

/* Tests only: hold(True) keeps the thread from starting another job until hold(False). */
static int held = 0;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;

static int
write_all(Job *job)
{
    Py_ssize_t at = 0; /* first view not fully written */
    size_t skip = 0;   /* bytes of views[at] already written */
    off_t offset = job->offset;
    struct iovec iov[IOV_MAX];
    while (at < job->count) {
        int n = 0;
        for (Py_ssize_t i = at; i < job->count && n < IOV_MAX; i++) {
            size_t off = i == at ? skip : 0;
            if ((size_t)job->views[i].len == off) {
                continue;
            }
            iov[n].iov_base = (char *)job->views[i].buf + off;
            iov[n].iov_len = (size_t)job->views[i].len - off;
            n++;
        }
        if (n == 0) {
            break;
        }
        ssize_t done = pwritev(job->fd, iov, n, offset);
        if (done < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (done == 0) {
            return EIO;
        }
        offset += done;
        size_t left = (size_t)done;
        while (left > 0 && at < job->count) { /* advance past what went */
            size_t rest = (size_t)job->views[at].len - skip;
            if (left < rest) {
                skip += left;
                left = 0;
            }
            else {
                left -= rest;
                at++;
                skip = 0;
            }
        }
        while (at < job->count && (size_t)job->views[at].len == skip) {
            at++;
            skip = 0;
        }
    }
    return 0;
}

static void *
run(void *unused)
{
    (void)unused;
#ifdef __linux__
    (void)pthread_setname_np(pthread_self(), "kcql-sink-write"); /* in top, py-spy, /proc */
#endif
#ifdef SCHED_BATCH
    /* only a preference: where the policy cannot be set, the thread runs as an ordinary one */
    struct sched_param param = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
#endif
    for (;;) {
        pthread_mutex_lock(&lock);
        while (head == NULL) {
            pthread_cond_wait(&work, &lock);
        }
        Job *job = head;
        head = job->next;
        if (head == NULL) {
            tail = NULL;
        }
        int skip = job->tracker->error != 0; /* the file is discarded anyway */
        pthread_mutex_unlock(&lock);

        pthread_mutex_lock(&hold_lock);
        while (held) {
            pthread_cond_wait(&hold_cond, &hold_lock);
        }
        pthread_mutex_unlock(&hold_lock);

        int error = 0;
        if (!skip) {
            if (job->hint) {
#ifdef SYNC_FILE_RANGE_WRITE
                sync_file_range(job->fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* only a hint: fsync decides */
#endif
            }
            else {
                error = write_all(job);
            }
        }

        pthread_mutex_lock(&lock);
        if (error && job->tracker->error == 0) {
            job->tracker->error = error;
        }
        job->tracker->done++;
        pending -= job->total;
        job->next = reaped;
        reaped = job;
        pthread_cond_broadcast(&finished);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

/* Release a job's views (the first `count`), its tracker reference if it took one, and the job
 * (with the GIL). */
static void
release(Job *job, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyBuffer_Release(&job->views[i]);
    }
    PyMem_Free(job->views);
    Py_XDECREF(job->tracker);
    PyMem_Free(job);
}

/* Release finished jobs' Python objects (with the GIL). */
static void
reap(void)
{
    pthread_mutex_lock(&lock);
    Job *job = reaped;
    reaped = NULL;
    pthread_mutex_unlock(&lock);
    while (job != NULL) {
        Job *next = job->next;
        release(job, job->count);
        job = next;
    }
}

static int
start(void)
{
    pid_t me = getpid();
    if (owner == me) {
        return 0;
    }
    /* a new process (or a forked child): a lock the parent held at the fork is not ours */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_work = PTHREAD_COND_INITIALIZER, fresh_finished = PTHREAD_COND_INITIALIZER;
    lock = fresh;
    work = fresh_work;
    finished = fresh_finished;
    head = tail = reaped = NULL; /* the parent's jobs: leaked, never written by this process */
    pending = 0;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&thread, &attr, run, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    owner = me;
    return 0;
}

static PyObject *
raise_for(Tracker *tracker)
{
    int error;
    pthread_mutex_lock(&lock);
    error = tracker->error;
    pthread_mutex_unlock(&lock);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyTypeObject TrackerType;

static int
enqueue(Job *job)
{
    if (start() < 0) {
        return -1;
    }
    /* with the GIL: the worker holds the lock only briefly and never waits for the GIL */
    pthread_mutex_lock(&lock);
    if (!job->hint && pending > limit) { /* the worker is far behind: wait without the GIL */
        pthread_mutex_unlock(&lock);
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&lock);
        while (pending > limit) {
            pthread_cond_wait(&finished, &lock);
        }
        pthread_mutex_unlock(&lock);
        Py_END_ALLOW_THREADS
        pthread_mutex_lock(&lock);
    }
    pending += job->total;
    job->tracker->queued++;
    job->next = NULL;
    if (tail == NULL) {
        head = tail = job;
    }
    else {
        tail->next = job;
        tail = job;
    }
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
    return 0;
}

static PyObject *
write_(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyObject_TypeCheck(args[0], &TrackerType)) {
        PyErr_SetString(PyExc_TypeError, "write(tracker, fd, pieces, offset, total)");
        return NULL;
    }
    Tracker *tracker = (Tracker *)args[0];
    int fd = (int)PyLong_AsLong(args[1]);
    long long offset = PyLong_AsLongLong(args[3]);
    Py_ssize_t total = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    reap();
    PyObject *checked = raise_for(tracker); /* an earlier job's error fails this write */
    if (checked == NULL) {
        return NULL;
    }
    Py_DECREF(checked);
    PyObject *seq = PySequence_Fast(args[2], "write: pieces must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    Job *job = PyMem_Calloc(1, sizeof(Job));
    Py_buffer *views = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Py_buffer));
    if (job == NULL || views == NULL) {
        PyMem_Free(job);
        PyMem_Free(views);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    job->views = views;
    Py_ssize_t sum = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &views[i], PyBUF_SIMPLE) < 0) {
            release(job, i);
            Py_DECREF(seq);
            return NULL;
        }
        sum += views[i].len;
    }
    Py_DECREF(seq); /* each view holds its object */
    if (sum != total) {
        release(job, count);
        PyErr_Format(PyExc_ValueError, "write: the pieces hold %zd bytes, not %zd", sum, total);
        return NULL;
    }
    Py_INCREF(tracker);
    job->tracker = tracker;
    job->fd = fd;
    job->offset = (off_t)offset;
    job->total = total;
    job->count = count;
    if (enqueue(job) < 0) {
        release(job, count);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
hint(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyObject_TypeCheck(args[0], &TrackerType)) {
        PyErr_SetString(PyExc_TypeError, "hint(tracker, fd)");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[1]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    reap();
    Job *job = PyMem_Calloc(1, sizeof(Job));
    if (job == NULL) {
        return PyErr_NoMemory();
    }
    Py_INCREF(args[0]);
    job->tracker = (Tracker *)args[0];
    job->fd = fd;
    job->hint = 1;
    if (enqueue(job) < 0) {
        release(job, 0);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
settle(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyObject_TypeCheck(args[0], &TrackerType)) {
        PyErr_SetString(PyExc_TypeError, "settle(tracker, raise_error)");
        return NULL;
    }
    Tracker *tracker = (Tracker *)args[0];
    int raise_error = PyObject_IsTrue(args[1]);
    if (raise_error < 0) {
        return NULL;
    }
    if (owner == getpid()) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&lock);
        while (tracker->done != tracker->queued) {
            pthread_cond_wait(&finished, &lock);
        }
        pthread_mutex_unlock(&lock);
        Py_END_ALLOW_THREADS
        reap();
    }
    if (raise_error) {
        return raise_for(tracker);
    }
    Py_RETURN_NONE;
}

static PyObject *
set_limit(PyObject *module, PyObject *arg)
{
    long long value = PyLong_AsLongLong(arg);
    if (value == -1 && PyErr_Occurred()) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    long long before = limit;
    limit = value;
    pthread_mutex_unlock(&lock);
    return PyLong_FromLongLong(before);
}

static PyTypeObject TrackerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "formats._write_thread.Tracker",
    .tp_basicsize = sizeof(Tracker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One staging file's queued jobs and its first error.",
    .tp_new = PyType_GenericNew,
};

static PyObject *
hold(PyObject *module, PyObject *arg)
{
    int value = PyObject_IsTrue(arg);
    if (value < 0) {
        return NULL;
    }
    pthread_mutex_lock(&hold_lock);
    held = value;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"write", (PyCFunction)(void (*)(void))write_, METH_FASTCALL,
     "write(tracker, fd, pieces, offset, total): queue pwritev of pieces at offset"},
    {"hint", (PyCFunction)(void (*)(void))hint, METH_FASTCALL,
     "hint(tracker, fd): queue the write-out hint (sync_file_range) after the queued writes"},
    {"settle", (PyCFunction)(void (*)(void))settle, METH_FASTCALL,
     "settle(tracker, raise_error): wait for the tracker's jobs; raise its first error if asked"},
    {"set_limit", set_limit, METH_O, "set_limit(bytes) -> the previous limit on queued bytes"},
    {"hold", hold, METH_O, "hold(flag): tests only, keep the thread from starting jobs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._write_thread",
    "Staging-file writes on a thread that never takes the GIL (see formats/_write_behind.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__write_thread(void)
{
    if (PyType_Ready(&TrackerType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&TrackerType);
    if (PyModule_AddObject(m, "Tracker", (PyObject *)&TrackerType) < 0) {
        Py_DECREF(&TrackerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
