/* Decoding of RocksDB block-based table blocks, the hot loop of sstable.py.
 *
 * decode_block(data, offset, size, strip) -> (keys, values)
 * Walks the prefix-compressed entries of one block (data or index) and returns
 * the full keys (with `strip` trailing bytes removed: 8 for internal keys) and
 * the values as two lists.  Raises ValueError on malformed input; the Python
 * caller turns that into lakemount's Corrupt.  A pure-Python version of the
 * same loop in sstable.py is used when this extension is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int varint32(const unsigned char *p, Py_ssize_t limit, Py_ssize_t *pos, uint32_t *out) {
    uint32_t result = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (*pos >= limit) return -1;
        unsigned char b = p[(*pos)++];
        result |= (uint32_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) { *out = result; return 0; }
    }
    return -1;
}

static PyObject *decode_block(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t offset, size, strip;
    if (!PyArg_ParseTuple(args, "y*nnn", &buf, &offset, &size, &strip)) return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf;
    PyObject *keys = NULL, *values = NULL, *result = NULL;
    unsigned char *key = NULL;
    Py_ssize_t cap = 256;
    if (offset < 0 || size < 4 || offset + size > buf.len) goto malformed;
    Py_ssize_t end = offset + size;
    uint32_t num_restarts;
    memcpy(&num_restarts, p + end - 4, 4);  /* little-endian hosts only (x86_64, aarch64) */
    num_restarts &= 0x7FFFFFFF;
    if ((Py_ssize_t)num_restarts * 4 + 4 > size) goto malformed;
    Py_ssize_t limit = end - 4 - 4 * (Py_ssize_t)num_restarts;
    keys = PyList_New(0);
    values = PyList_New(0);
    key = (unsigned char *)PyMem_Malloc(cap);
    if (!keys || !values || !key) goto fail;
    Py_ssize_t pos = offset, klen = 0;
    while (pos < limit) {
        uint32_t shared, non_shared, vlen;
        if (varint32(p, limit, &pos, &shared) || varint32(p, limit, &pos, &non_shared) ||
            varint32(p, limit, &pos, &vlen))
            goto malformed;
        if (shared > klen || pos + (Py_ssize_t)non_shared + (Py_ssize_t)vlen > limit) goto malformed;
        Py_ssize_t need = (Py_ssize_t)shared + non_shared;
        if (need > cap) {
            while (cap < need) cap *= 2;
            unsigned char *grown = (unsigned char *)PyMem_Realloc(key, cap);
            if (!grown) goto fail;
            key = grown;
        }
        memcpy(key + shared, p + pos, non_shared);
        klen = need;
        pos += non_shared;
        if (klen < strip) goto malformed;
        PyObject *k = PyBytes_FromStringAndSize((const char *)key, klen - strip);
        if (!k) goto fail;
        int rc = PyList_Append(keys, k);
        Py_DECREF(k);
        if (rc) goto fail;
        PyObject *v = PyBytes_FromStringAndSize((const char *)p + pos, vlen);
        if (!v) goto fail;
        rc = PyList_Append(values, v);
        Py_DECREF(v);
        if (rc) goto fail;
        pos += vlen;
    }
    result = PyTuple_Pack(2, keys, values);
    goto fail; /* shared cleanup */
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed block");
fail:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    if (key) PyMem_Free(key);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_block", decode_block, METH_VARARGS, "Decode one SSTable block into (keys, values)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sstblock", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sstblock(void) { return PyModule_Create(&module); }
