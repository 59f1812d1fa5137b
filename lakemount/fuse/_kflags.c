/*
 * Open-reply flags that pyfuse3 cannot express: ``noflush`` and ``cache_readdir``.
 *
 * pyfuse3's FileInfo carries fh, keep_cache, direct_io and nonseekable only,
 * and its opendir reply carries just the handle.  libfuse's fuse_file_info has
 * two more bits that matter for a read-mostly mount:
 *
 *   noflush        the kernel skips FLUSH on close(2): one round trip less per
 *                  open/read/close of a file opened read-only;
 *   cache_readdir  the kernel keeps a directory's entries in its page cache and
 *                  answers getdents(2) from there until the inode is invalidated.
 *
 * This module defines ``fuse_reply_open``.  Loaded with RTLD_GLOBAL before
 * pyfuse3 (lakemount/fuse/kflags.py), it is the definition pyfuse3's extension
 * binds to; it reads two request bits that lakemount's adapter puts in the
 * handle number, sets the matching libfuse bits, and calls libfuse's own
 * ``fuse_reply_open``.  The handle number reaches the kernel unchanged (the
 * adapter masks the bits off every handle it is given back).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define FUSE_USE_VERSION 35
#include <dlfcn.h>
#include <fuse3/fuse_lowlevel.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* Keep in sync with lakemount/fuse/kflags.py. */
#define FH_NOFLUSH (UINT64_C(1) << 62)
#define FH_CACHE_DIR (UINT64_C(1) << 61)

typedef int (*reply_open_fn)(fuse_req_t, const struct fuse_file_info *);
typedef struct fuse_session *(*session_new_fn)(struct fuse_args *, const struct fuse_lowlevel_ops *, size_t, void *);
typedef void (*flush_fn)(fuse_req_t, fuse_ino_t, struct fuse_file_info *);

typedef const struct fuse_ctx *(*req_ctx_fn)(fuse_req_t);

static reply_open_fn real_reply_open = NULL;
static req_ctx_fn real_req_ctx = NULL; /* this module links no libfuse: its functions are looked up at load */
static session_new_fn real_session_new = NULL;
static flush_fn pyfuse3_flush = NULL;
static struct fuse_lowlevel_ops wrapped_ops;

/* Closers of the flushes not yet taken by the adapter: fh -> thread id (0: two pending, unknown). */
#define CLOSERS 256
static struct {
    uint64_t fh;
    pid_t tid;
    int used;
} closers[CLOSERS];

static void note_closer(uint64_t fh, pid_t tid) {
    int free_slot = -1;
    for (int i = 0; i < CLOSERS; i++) {
        if (closers[i].used && closers[i].fh == fh) {
            closers[i].tid = 0; /* a second flush of the handle before the first was taken: ambiguous */
            return;
        }
        if (!closers[i].used && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0) { /* full: not noted, the adapter treats the close as its opener's */
        closers[free_slot].fh = fh;
        closers[free_slot].tid = tid;
        closers[free_slot].used = 1;
    }
}

static void flush_noting_closer(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    const struct fuse_ctx *ctx = real_req_ctx(req);
    note_closer(fi->fh, ctx != NULL ? ctx->pid : 0);
    pyfuse3_flush(req, ino, fi);
}

__attribute__((visibility("default"))) struct fuse_session *fuse_session_new(struct fuse_args *args,
                                                                           const struct fuse_lowlevel_ops *op,
                                                                           size_t op_size, void *userdata) {
    if (op != NULL && op->flush != NULL && op_size <= sizeof(wrapped_ops)) {
        memset(&wrapped_ops, 0, sizeof(wrapped_ops));
        memcpy(&wrapped_ops, op, op_size);
        pyfuse3_flush = op->flush;
        wrapped_ops.flush = flush_noting_closer;
        op = &wrapped_ops;
    }
    return real_session_new(args, op, op_size, userdata);
}

__attribute__((visibility("default"))) int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *f) {
    struct fuse_file_info fi = *f;
    if (fi.fh & FH_NOFLUSH)
        fi.noflush = 1;
    if (fi.fh & FH_CACHE_DIR) {
        fi.cache_readdir = 1;
        fi.keep_cache = 1;
    }
    return real_reply_open(req, &fi);
}

static PyObject *kflags_active(PyObject *self, PyObject *unused) {
    /* Active if a global lookup of the symbol finds this definition. */
    void *found = dlsym(RTLD_DEFAULT, "fuse_reply_open");
    return PyBool_FromLong(found == (void *)&fuse_reply_open);
}

static PyObject *kflags_closer(PyObject *self, PyObject *arg) {
    /* The thread that sent handle fh's pending FLUSH (taken: asked once), 0 if not known. */
    unsigned long long fh = PyLong_AsUnsignedLongLong(arg);
    if (fh == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < CLOSERS; i++) {
        if (closers[i].used && closers[i].fh == fh) {
            closers[i].used = 0;
            return PyLong_FromLong((long)closers[i].tid);
        }
    }
    return PyLong_FromLong(0);
}

static PyObject *kflags_wraps_flush(PyObject *self, PyObject *unused) {
    /* Active if the session was made through this module's fuse_session_new. */
    void *found = dlsym(RTLD_DEFAULT, "fuse_session_new");
    return PyBool_FromLong(found == (void *)&fuse_session_new);
}

static PyMethodDef methods[] = {
    {"active", kflags_active, METH_NOARGS, "True if pyfuse3's open replies pass through this module."},
    {"closer", kflags_closer, METH_O, "The thread id that sent the pending FLUSH of a handle (0: not known)."},
    {"wraps_flush", kflags_wraps_flush, METH_NOARGS, "True if FLUSH requests pass through this module."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kflags", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kflags(void) {
    void *lib = dlopen("libfuse3.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "libfuse3.so.3: %s", dlerror());
        return NULL;
    }
    real_reply_open = (reply_open_fn)dlsym(lib, "fuse_reply_open");
    if (real_reply_open == NULL) {
        PyErr_SetString(PyExc_ImportError, "libfuse3.so.3 has no fuse_reply_open");
        return NULL;
    }
    real_session_new = (session_new_fn)dlsym(lib, "fuse_session_new");
    real_req_ctx = (req_ctx_fn)dlsym(lib, "fuse_req_ctx");
    if (real_session_new == NULL || real_req_ctx == NULL) {
        PyErr_SetString(PyExc_ImportError, "libfuse3.so.3 has no fuse_session_new or fuse_req_ctx");
        return NULL;
    }
    return PyModule_Create(&module);
}
