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

/* Keep in sync with lakemount/fuse/kflags.py. */
#define FH_NOFLUSH (UINT64_C(1) << 62)
#define FH_CACHE_DIR (UINT64_C(1) << 61)

typedef int (*reply_open_fn)(fuse_req_t, const struct fuse_file_info *);

static reply_open_fn real_reply_open = NULL;

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

static PyMethodDef methods[] = {
    {"active", kflags_active, METH_NOARGS, "True if pyfuse3's open replies pass through this module."},
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
    return PyModule_Create(&module);
}
